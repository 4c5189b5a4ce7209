package kubetest

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Start gives a test a control plane of its own and stops every process
// of it, container processes included, when the test ends. Not parallel:
// a second control plane beside the shared one is load enough.
func TestStartStopsEverything(t *testing.T) {
	need(t)
	var pids []int
	t.Run("own control plane", func(t *testing.T) {
		begin := time.Now()
		e := Start(t, Options{Nodes: 1})
		t.Logf("Start with 1 node took %s", time.Since(begin).Round(time.Millisecond))
		if len(e.Nodes) != 1 {
			t.Fatalf("nodes %v", e.Nodes)
		}
		ns := e.Namespace(t, "own")
		create(t, e, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
		})
		p := e.WaitPod(t, ns, "p", ready)
		pids = append(pids, pidOf(t, p.Status.ContainerStatuses[0].ContainerID))
		for _, c := range e.cp.components {
			pids = append(pids, c.cmd.Process.Pid)
		}
	})
	for _, pid := range pids {
		if alive := groupAlive(t, pid); len(alive) > 0 {
			t.Errorf("process group %d still has %v after the test ended", pid, alive)
		}
	}
}
