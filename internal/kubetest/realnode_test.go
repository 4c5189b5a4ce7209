package kubetest

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// needRealNode skips t where no real node can start, saying why (unless
// BERTH_KUBE_NODE=real, which makes that a failure).
func needRealNode(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane and a real node; skipped under -short")
	}
	if err := RealNodeUnavailable(""); err != nil {
		if os.Getenv(NodeEnv) == "real" {
			t.Fatalf("%s=real, but no real node can start here: %v", NodeEnv, err)
		}
		t.Skipf("no real node can start here: %v", err)
	}
}

// TestRealNode runs a restricted pod on a real node and checks, from
// inside it, what only a real container runtime gives: its uid, no
// capabilities, a seccomp filter, its own network namespace and address,
// a read-only root, its memory and process limits; and that stopping
// the node leaves no process, mount, network device or cgroup behind.
func TestRealNode(t *testing.T) {
	needRealNode(t)
	ctx := context.Background()
	debian, err := DebianImage(ctx, "registry.test/debian:1", "")
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the namespace is gone
	// and the Env closed.
	var node *RealNode
	t.Cleanup(func() {
		if node == nil {
			return
		}
		if left := node.Leftovers(); len(left) > 0 {
			t.Errorf("the stopped node left behind: %s", strings.Join(left, "\n"))
		}
	})
	began := time.Now()
	e := Start(t, Options{Node: NodeReal, NodeImages: []NodeImage{debian}, PodPidsLimit: 64})
	t.Logf("%s; started with the control plane in %s", e.NodeNote, time.Since(began).Round(time.Millisecond))
	node = e.Node
	ns := e.Namespace(t, "real")
	no, yes, uid := false, true, int64(65532)
	mem := resource.MustParse("64Mi")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "restricted", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name: "probe", Image: debian.Ref, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/bash", "-c", `id -u; grep ^CapEff /proc/self/status; grep ^Seccomp: /proc/self/status
touch /written 2>/dev/null && echo root-writable || echo root-read-only
cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max
readlink /proc/self/ns/net; echo done; sleep infinity`},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsNonRoot: &yes, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: resource.MustParse("500m")}},
			}},
		},
	}
	created := time.Now()
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.WaitPod(t, ns, pod.Name, func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	t.Logf("pod running in %s at %s", time.Since(created).Round(time.Millisecond), p.Status.PodIP)
	if !node.Subnet.Contains(netIP(p.Status.PodIP)) {
		t.Fatalf("pod IP %s is not in the node's pod network %s", p.Status.PodIP, node.Subnet)
	}
	var out string
	deadline := time.Now().Add(WaitTimeout)
	for !strings.Contains(out, "done") {
		if time.Now().After(deadline) {
			t.Fatalf("the pod's log: %q", out)
		}
		raw, err := e.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil {
			out = string(raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	for _, want := range []string{"65532\n", "CapEff:\t0000000000000000\n", "Seccomp:\t2\n", "root-read-only\n", "67108864\n", "64\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the pod: want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, hostNet) {
		t.Errorf("the pod shares the host's network namespace %s:\n%s", hostNet, out)
	}
}

func netIP(s string) net.IP { return net.ParseIP(s) }
