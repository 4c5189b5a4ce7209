package kubetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
echo "memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"
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
	for _, want := range []string{"65532", "CapEff:\t0000000000000000", "Seccomp:\t2", "root-read-only", "memory=67108864"} {
		if !strings.Contains("\n"+out, "\n"+want+"\n") {
			t.Errorf("inside the pod: want the line %q in\n%s", want, out)
		}
	}
	// The process limit is the pod's cgroup's, which the container does
	// not see: look from the host.
	limits, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", node.cgroupRoot, "kubepods", "*pod"+string(p.UID), "pids.max"))
	limits2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", node.cgroupRoot, "kubepods", "*", "pod"+string(p.UID), "pids.max"))
	limits = append(limits, limits2...)
	if len(limits) != 1 {
		t.Fatalf("the pod's process limit: found %v under the node's cgroup", limits)
	}
	if b, err := os.ReadFile(limits[0]); err != nil || strings.TrimSpace(string(b)) != "64" {
		t.Errorf("the pod's process limit %s is %q (%v), want the node's podPidsLimit 64", limits[0], b, err)
	}
	if strings.Contains(out, hostNet) {
		t.Errorf("the pod shares the host's network namespace %s:\n%s", hostNet, out)
	}
}

func netIP(s string) net.IP { return net.ParseIP(s) }

// crashChildEnv makes TestRealNodeSweptWhenTheTestDies the child that
// starts a node and is killed.
const crashChildEnv = "KUBETEST_CRASH_CHILD"

// TestRealNodeSweptWhenTheTestDies starts a real node with a pod in a
// child test binary, kills the child (SIGKILL, as a test timeout's panic
// or an impatient developer would), and waits until nothing of the node
// is left: its processes, mounts, bridge, cgroups and folder go with the
// sweeper, which outlives the test binary.
func TestRealNodeSweptWhenTheTestDies(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild(t)
		return
	}
	needRealNode(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRealNodeSweptWhenTheTestDies$", "-test.v", "-test.short")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var node *RealNode
	var logDir string
	lines := bufio.NewScanner(out)
	var seen strings.Builder
	for node == nil && lines.Scan() {
		seen.WriteString(lines.Text() + "\n")
		if f := strings.Fields(lines.Text()); len(f) == 6 && f[0] == "CRASH-NODE" {
			node = &RealNode{dir: f[1], bridge: f[2], cgroupRoot: f[3], Name: f[4]}
			logDir = f[5]
		}
	}
	if node == nil {
		cmd.Wait()
		t.Fatalf("the child did not start its node:\n%s", seen.String())
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(logDir)) }) // the child's test folder
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(WaitTimeout)
	for {
		left := node.Leftovers()
		if _, err := os.Stat(node.dir); err == nil {
			left = append(left, "folder "+node.dir)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sweep, _ := os.ReadFile(filepath.Join(logDir, "node-sweep.log"))
			t.Fatalf("the killed test's node left behind: %s\nits sweep:\n%s", strings.Join(left, "\n"), sweep)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// crashChild starts a real node and a pod on it, says where, and waits
// to be killed.
func crashChild(t *testing.T) {
	ctx := context.Background()
	img, err := StaticImage("registry.test/static:1")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kubetest-crash-")
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(ctx, Options{Dir: filepath.Join(dir, "env"), Node: NodeReal, NodeImages: []NodeImage{img}})
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t, "crash")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sleep", Image: img.Ref, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"/bin/sleep", "1000"},
		}}},
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPod(t, ns, pod.Name, func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	fmt.Printf("CRASH-NODE %s %s %s %s %s\n", e.Node.dir, e.Node.bridge, e.Node.cgroupRoot, e.Node.Name, e.Dir)
	time.Sleep(WaitTimeout) // killed before
	t.Fatal("not killed")
}
