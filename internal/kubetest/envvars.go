package kubetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// configError is a container that cannot be configured yet (a Secret it
// reads is missing): a kubelet waits with CreateContainerConfigError and
// tries again, without counting a restart.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// envList is a container's environment in order; later names win.
type envList struct {
	names  []string
	values map[string]string
}

func (l *envList) set(name, value string) {
	if _, ok := l.values[name]; !ok {
		l.names = append(l.names, name)
	}
	l.values[name] = value
}

// environ returns NAME=value pairs, each value passed through fn.
func (l *envList) environ(fn func(string) string) []string {
	out := make([]string, 0, len(l.names))
	for _, n := range l.names {
		out = append(out, n+"="+fn(l.values[n]))
	}
	return out
}

// containerEnv resolves the container's environment as a kubelet does:
// the variables every container gets, then envFrom, then env, values
// expanded with $(VAR) from what precedes them.
func (w *podWorker) containerEnv(ctx context.Context, pod *corev1.Pod, c *container) (*envList, error) {
	l := &envList{values: map[string]string{}}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	l.set("PATH", path)
	l.set("HOSTNAME", podHostname(pod))
	l.set("HOME", c.home())
	// The kubernetes Service's variables, pointing where the API server
	// really listens (no kube-proxy routes the Service IP).
	port := strconv.Itoa(w.k.cfg.apiPort)
	l.set("KUBERNETES_SERVICE_HOST", nodeIP)
	l.set("KUBERNETES_SERVICE_PORT", port)
	l.set("KUBERNETES_SERVICE_PORT_HTTPS", port)
	l.set("KUBERNETES_PORT", "tcp://"+nodeIP+":"+port)
	cs := w.k.cfg.client.CoreV1()
	for _, from := range c.spec.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := cs.ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && deref(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, &configError{fmt.Errorf("configmap %q not found: %w", from.ConfigMapRef.Name, err)}
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := cs.Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && deref(from.SecretRef.Optional) {
					continue
				}
				return nil, &configError{fmt.Errorf("secret %q not found: %w", from.SecretRef.Name, err)}
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for k, v := range data {
			l.set(from.Prefix+k, v)
		}
	}
	for _, e := range c.spec.Env {
		if e.ValueFrom == nil {
			l.set(e.Name, expand(e.Value, l.values))
			continue
		}
		v, ok, err := w.valueFrom(ctx, pod, c, e.ValueFrom)
		if err != nil {
			return nil, err
		}
		if ok {
			l.set(e.Name, v)
		}
	}
	return l, nil
}

// valueFrom resolves one env valueFrom; ok is false for an optional
// reference that is missing.
func (w *podWorker) valueFrom(ctx context.Context, pod *corev1.Pod, c *container, src *corev1.EnvVarSource) (string, bool, error) {
	cs := w.k.cfg.client.CoreV1()
	switch {
	case src.FieldRef != nil:
		v, err := w.fieldValue(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := w.resourceValue(c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := cs.Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		var data map[string]string
		if err == nil {
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		return keyValue("Secret", pod.Namespace, ref.Name, ref.Key, deref(ref.Optional), data, err)
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := cs.ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		var data map[string]string
		if err == nil {
			data = cm.Data
		}
		return keyValue("ConfigMap", pod.Namespace, ref.Name, ref.Key, deref(ref.Optional), data, err)
	}
	return "", false, &configError{errors.New("env valueFrom: no source kubetest supports")}
}

// keyValue picks key from the data of a Secret or ConfigMap that was
// read with err; ok is false for an optional one that is missing.
func keyValue(kind, namespace, name, key string, optional bool, data map[string]string, err error) (string, bool, error) {
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return "", false, nil
		}
		return "", false, &configError{fmt.Errorf("%s %q not found: %w", strings.ToLower(kind), name, err)}
	}
	v, ok := data[key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, &configError{fmt.Errorf("couldn't find key %s in %s %s/%s", key, kind, namespace, name)}
	}
	return v, true, nil
}

// fieldValue resolves a downward API field path.
func (w *podWorker) fieldValue(pod *corev1.Pod, path string) (string, error) {
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return nodeIP, nil
	case "status.podIP", "status.podIPs":
		return ip, nil
	}
	return "", &configError{fmt.Errorf("unsupported fieldRef %q", path)}
}

// resourceValue resolves a resourceFieldRef: the container's limit (the
// node's allocatable when it has none) or request, divided and rounded up.
func (w *podWorker) resourceValue(c *container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", &configError{fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)}
	}
	res := corev1.ResourceName(name)
	var q resource.Quantity
	switch kind {
	case "limits":
		q = c.spec.Resources.Limits[res]
		if q.IsZero() {
			q = w.k.quantity(res)
		}
	case "requests":
		q = c.spec.Resources.Requests[res]
	default:
		return "", &configError{fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)}
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	v := math.Ceil(q.AsApproximateFloat64() / div.AsApproximateFloat64())
	return strconv.FormatInt(int64(v), 10), nil
}

// subscript parses path as prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for k, v := range m {
		lines = append(lines, k+"="+strconv.Quote(v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// expand replaces $(NAME) with vars[NAME] as Kubernetes does for env
// values, command and args: $$ escapes a $, and a reference to an unknown
// name stays as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func deref(b *bool) bool { return b != nil && *b }
