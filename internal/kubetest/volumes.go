package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setupVolumes materialises the pod's volumes under its folder: an
// emptyDir is a fresh folder, a Secret, ConfigMap, downwardAPI or
// projected volume is a folder of files written from the API once, as
// they are when the pod starts (later changes are not synced), and a
// hostPath is the host path itself. Volumes made already are kept, so a
// retry after a missing Secret redoes only what failed.
func (w *podWorker) setupVolumes(ctx context.Context) error {
	pod := w.latest()
	for _, v := range pod.Spec.Volumes {
		w.mu.Lock()
		_, done := w.volumes[v.Name]
		w.mu.Unlock()
		if done {
			continue
		}
		host := filepath.Join(w.dir, "volumes", v.Name)
		var err error
		switch {
		case v.EmptyDir != nil:
			err = os.MkdirAll(host, 0o777)
		case v.HostPath != nil:
			host = v.HostPath.Path
			if v.HostPath.Type != nil && (*v.HostPath.Type == corev1.HostPathDirectoryOrCreate) {
				err = os.MkdirAll(host, 0o755)
			}
		case v.Secret != nil:
			err = w.secretFiles(ctx, pod, host, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, deref(v.Secret.Optional))
		case v.ConfigMap != nil:
			err = w.configMapFiles(ctx, pod, host, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, deref(v.ConfigMap.Optional))
		case v.DownwardAPI != nil:
			err = w.downwardFiles(pod, host, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		case v.Projected != nil:
			err = w.projectedFiles(ctx, pod, host, v.Projected)
		default:
			err = fmt.Errorf("kubetest supports no volume source of this kind")
		}
		if err != nil {
			return fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err)
		}
		w.mu.Lock()
		w.volumes[v.Name] = host
		w.mu.Unlock()
	}
	return nil
}

func (w *podWorker) secretFiles(ctx context.Context, pod *corev1.Pod, dir, name string, items []corev1.KeyToPath, mode *int32, optional bool) error {
	s, err := w.k.cfg.client.CoreV1().Secrets(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("secret %q not found: %w", name, err)
	}
	return writeKeys(dir, s.Data, items, mode, optional)
}

func (w *podWorker) configMapFiles(ctx context.Context, pod *corev1.Pod, dir, name string, items []corev1.KeyToPath, mode *int32, optional bool) error {
	cm, err := w.k.cfg.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("configmap %q not found: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(dir, data, items, mode, optional)
}

// writeKeys writes data's keys as files, or only items, at their paths.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, mode *int32, optional bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(items) == 0 {
		for k, v := range data {
			if err := writeFile(dir, k, v, mode, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("configmap or secret references non-existent key %q", it.Key)
		}
		if err := writeFile(dir, it.Path, v, mode, it.Mode); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes one volume file at a relative path, with the item's
// mode, else the volume's defaultMode, else 0644.
func writeFile(dir, rel string, data []byte, defMode, itemMode *int32) error {
	if filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
		return fmt.Errorf("volume file path %q must be relative and within the volume", rel)
	}
	perm := os.FileMode(0o644)
	if defMode != nil {
		perm = os.FileMode(*defMode)
	}
	if itemMode != nil {
		perm = os.FileMode(*itemMode)
	}
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, perm); err != nil {
		return err
	}
	return os.Chmod(p, perm) // WriteFile's perm is masked by umask
}

func (w *podWorker) downwardFiles(pod *corev1.Pod, dir string, items []corev1.DownwardAPIVolumeFile, mode *int32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = w.fieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := w.containerNamed(it.ResourceFieldRef.ContainerName)
			if c == nil {
				return fmt.Errorf("downwardAPI: no container %q", it.ResourceFieldRef.ContainerName)
			}
			v, err = w.resourceValue(c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		if err := writeFile(dir, it.Path, []byte(v), mode, it.Mode); err != nil {
			return err
		}
	}
	return nil
}

// projectedFiles writes each source of a projected volume into one folder;
// a ServiceAccount token is requested for the pod, bound to it, as a
// kubelet does.
func (w *podWorker) projectedFiles(ctx context.Context, pod *corev1.Pod, dir string, p *corev1.ProjectedVolumeSource) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, src := range p.Sources {
		var err error
		switch {
		case src.Secret != nil:
			err = w.secretFiles(ctx, pod, dir, src.Secret.Name, src.Secret.Items, p.DefaultMode, deref(src.Secret.Optional))
		case src.ConfigMap != nil:
			err = w.configMapFiles(ctx, pod, dir, src.ConfigMap.Name, src.ConfigMap.Items, p.DefaultMode, deref(src.ConfigMap.Optional))
		case src.DownwardAPI != nil:
			err = w.downwardFiles(pod, dir, src.DownwardAPI.Items, p.DefaultMode)
		case src.ServiceAccountToken != nil:
			err = w.tokenFile(ctx, pod, dir, src.ServiceAccountToken, p.DefaultMode)
		default:
			err = fmt.Errorf("kubetest supports no projected source of this kind")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *podWorker) tokenFile(ctx context.Context, pod *corev1.Pod, dir string, src *corev1.ServiceAccountTokenProjection, mode *int32) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := w.k.cfg.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount %s: %w", sa, err)
	}
	return writeFile(dir, src.Path, []byte(tr.Status.Token), mode, nil)
}

// containerNamed finds a container (or init container) by name.
func (w *podWorker) containerNamed(name string) *container {
	for _, c := range append(append([]*container(nil), w.initCs...), w.cs...) {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}
