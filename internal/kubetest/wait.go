package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// WaitTimeout bounds WaitPod: generous, since a loaded 2-core machine is
// slow, and a wait that succeeds returns as soon as the watch shows it.
const WaitTimeout = 2 * time.Minute

// WaitPod waits on a watch until cond holds for the pod namespace/name
// (cond sees nil once the pod is deleted) and returns the pod it held
// for. It fails t after WaitTimeout, showing the pod's last status.
func (e *Env) WaitPod(t testing.TB, namespace, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	var last *corev1.Pod
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	pods := e.Client.CoreV1().Pods(namespace)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	precond := func(store cache.Store) (bool, error) {
		// A pod that is already gone (or never was) satisfies a cond
		// waiting for its deletion.
		if _, exists, _ := store.GetByKey(namespace + "/" + name); !exists {
			return cond(nil), nil
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, precond, func(ev watch.Event) (bool, error) {
		p, _ := ev.Object.(*corev1.Pod)
		if ev.Type == watch.Deleted {
			last = nil
			return cond(nil), nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		state := "deleted or never created"
		if last != nil {
			state = fmt.Sprintf("phase %s, conditions %v, init %v, containers %v", last.Status.Phase, last.Status.Conditions, last.Status.InitContainerStatuses, last.Status.ContainerStatuses)
		}
		t.Fatalf("kubetest: pod %s/%s: condition not met within %s: %v; last seen: %s", namespace, name, WaitTimeout, err, state)
	}
	return last
}
