package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Create implements runtime.Runtime: it checks the sandbox, then creates
// its Pod and the token and upstreams Secrets the Pod owns. A sandbox
// whose pod is there and alive is left as it is; one whose pod ended is replaced (an emptyDir
// workspace ends with its pod, so the new one starts empty).
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) error {
	res, err := r.resourcesFor(spec)
	if err != nil {
		return err
	}
	if err := r.check(ctx, spec, res); err != nil {
		return err
	}
	pods := r.client.CoreV1().Pods(spec.Namespace)
	if p, err := pods.Get(ctx, spec.ServerID, metav1.GetOptions{}); err == nil {
		if st := stateOf(p); st.State != runtime.StateFailed {
			return nil
		}
		if err := r.deletePod(ctx, spec.Namespace, spec.ServerID); err != nil {
			return fmt.Errorf("replace the ended pod of %s: %w", spec.ServerID, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("look up the pod of %s: %w", spec.ServerID, err)
	}
	pod, err := pods.Create(ctx, r.podFor(spec, res), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another replica's retry of the same start got there first.
		if pod, err = pods.Get(ctx, spec.ServerID, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("look up the pod of %s: %w", spec.ServerID, err)
		}
	} else if err != nil {
		return fmt.Errorf("create the pod of %s: %w", spec.ServerID, err)
	}
	if err := ensureOwned(ctx, r.client.CoreV1().Secrets(spec.Namespace), secretFor(spec, pod), pod, "token secret"); err != nil {
		return err
	}
	up, err := upstreamsFor(spec, pod)
	if err != nil {
		return err
	}
	return ensureOwned(ctx, r.client.CoreV1().Secrets(spec.Namespace), up, pod, "upstreams secret")
}

// objectClient is what ensureOwned needs of a typed client.
type objectClient[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ensureOwned creates an object the pod owns (its token and upstreams
// Secrets), replacing one left over from an earlier pod of
// the same name (whose owner is another pod).
func ensureOwned[T metav1.Object](ctx context.Context, c objectClient[T], want T, pod *corev1.Pod, what string) error {
	for range 3 {
		_, err := c.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the %s of %s: %w", what, pod.Name, err)
		}
		have, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("look up the %s of %s: %w", what, pod.Name, err)
		}
		if refs := have.GetOwnerReferences(); len(refs) == 1 && refs[0].UID == pod.UID {
			return nil
		}
		uid := have.GetUID()
		err = c.Delete(ctx, want.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("replace the %s of %s: %w", what, pod.Name, err)
		}
	}
	return fmt.Errorf("create the %s of %s: it kept being replaced", what, pod.Name)
}

// WaitReady implements runtime.Runtime, woken by the pod informer.
func (r *Runtime) WaitReady(ctx context.Context, id string) (runtime.Endpoint, error) {
	if err := checkLabel("server id", id); err != nil {
		return runtime.Endpoint{}, err
	}
	for {
		changed := r.changes.next()
		if p, ok := r.find(id); ok {
			st := r.stateOf(p)
			switch st.State {
			case runtime.StateReady:
				return st.Endpoint, nil
			case runtime.StateFailed:
				return runtime.Endpoint{}, fmt.Errorf("sandbox %s will not start: %s", id, st.Message)
			}
		}
		select {
		case <-ctx.Done():
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s not ready: %w", id, ctx.Err())
		case <-changed:
		}
	}
}

// Status implements runtime.Runtime.
func (r *Runtime) Status(ctx context.Context, id string) (runtime.Status, error) {
	if err := checkLabel("server id", id); err != nil {
		return runtime.Status{}, err
	}
	p, ok := r.find(id)
	if !ok {
		return runtime.Status{State: runtime.StateGone}, nil
	}
	return r.stateOf(p), nil
}

// Delete implements runtime.Runtime: the pod goes, and its Secrets with it,
// and Delete waits until the pod is gone from the API.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := checkLabel("server id", id); err != nil {
		return err
	}
	p, ok := r.find(id)
	if !ok {
		return nil
	}
	return r.deletePod(ctx, p.Namespace, id)
}

func (r *Runtime) deletePod(ctx context.Context, ns, id string) error {
	bg := metav1.DeletePropagationBackground
	err := r.client.CoreV1().Pods(ns).Delete(ctx, id, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the pod of %s: %w", id, err)
	}
	// The garbage collector would delete the Secrets too; doing it now
	// keeps the token and the upstream headers (which may be credentials)
	// from outliving the pod by a collector's delay.
	err = r.client.CoreV1().Secrets(ns).Delete(ctx, secretName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the token secret of %s: %w", id, err)
	}
	err = r.client.CoreV1().Secrets(ns).Delete(ctx, upstreamsName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the upstreams secret of %s: %w", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		changed := r.changes.next()
		if _, err := r.pods[ns].Pods(ns).Get(id); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("delete sandbox %s: its pod is still there: %w", id, wctx.Err())
		case <-changed:
		}
	}
}

// maxLogBytes bounds a log read: a sandbox decides how much it logs.
const maxLogBytes = 1 << 20

// Logs implements runtime.Runtime from the sandbox container's log.
func (r *Runtime) Logs(ctx context.Context, id string, tail int) (string, error) {
	if err := checkLabel("server id", id); err != nil {
		return "", err
	}
	p, ok := r.find(id)
	if !ok {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, os.ErrNotExist)
	}
	opts := &corev1.PodLogOptions{Container: "sandbox", LimitBytes: ptr(int64(maxLogBytes))}
	if tail > 0 {
		opts.TailLines = ptr(int64(tail))
	}
	stream, err := r.client.CoreV1().Pods(p.Namespace).GetLogs(id, opts).Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, err)
	}
	defer stream.Close()
	b, err := io.ReadAll(io.LimitReader(stream, maxLogBytes))
	if err != nil {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, err)
	}
	return string(b), nil
}

// List implements runtime.Runtime from the informer caches.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	var ids []string
	for _, ns := range r.namespaces() {
		pods, err := r.pods[ns].Pods(ns).List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list sandboxes in %s: %w", ns, err)
		}
		for _, p := range pods {
			if id := p.Labels[labelServer]; id != "" && id == p.Name {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

var _ runtime.Assigner = (*Runtime)(nil)

// Assign implements runtime.Assigner: a claimed warm pod's client and
// owner labels, updated with the pod's resource version so a concurrent
// writer makes this retry on the fresh pod rather than be overwritten.
func (r *Runtime) Assign(ctx context.Context, serverID, clientID, ownerID string) error {
	p, ok := r.find(serverID)
	if !ok {
		return fmt.Errorf("assign sandbox %s: no pod", serverID)
	}
	pods := r.client.CoreV1().Pods(p.Namespace)
	for range 5 {
		cur, err := pods.Get(ctx, serverID, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("assign sandbox %s: %w", serverID, err)
		}
		cur.Labels[labelClient], cur.Labels[labelOwner] = clientID, ownerID
		if _, err = pods.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("assign sandbox %s: %w", serverID, err)
			}
			return nil
		}
	}
	return fmt.Errorf("assign sandbox %s: its pod kept changing", serverID)
}

var _ runtime.EventReporter = (*Runtime)(nil)

// maxEvents bounds the events get_server shows.
const maxEvents = 20

// Events implements runtime.EventReporter from the pod's events.
func (r *Runtime) Events(ctx context.Context, id string) ([]runtime.Event, error) {
	p, ok := r.find(id)
	if !ok {
		return nil, nil
	}
	out, err := r.podEvents(ctx, p)
	if len(out) > maxEvents {
		out = out[len(out)-maxEvents:]
	}
	return out, err
}

// podEvents are the events of the pod p (not of an earlier pod of its
// name), oldest first.
func (r *Runtime) podEvents(ctx context.Context, p *corev1.Pod) ([]runtime.Event, error) {
	list, err := r.client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
			fields.OneTermEqualSelector("involvedObject.name", p.Name)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("events of sandbox %s: %w", p.Name, err)
	}
	out := make([]runtime.Event, 0, len(list.Items))
	for _, e := range list.Items {
		if e.InvolvedObject.UID != p.UID {
			continue // an earlier pod of the same name
		}
		when := e.LastTimestamp.Time
		if when.IsZero() {
			when = e.EventTime.Time
		}
		out = append(out, runtime.Event{Time: when, Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
	}
	slices.SortFunc(out, func(a, b runtime.Event) int { return a.Time.Compare(b.Time) })
	return out, nil
}
