package kube_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
)

const (
	deadline = 90 * time.Second
	token    = "kube-test-token-kube-test-token-0123456"
)

func spec(ns, id string) runtime.Spec {
	return runtime.Spec{ServerID: id, Namespace: ns, ClientID: "c1", OwnerID: "u1", ImageTag: sandboxImage, AgentToken: token}
}

func waitReady(t *testing.T, rt runtime.Runtime, id string) runtime.Endpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	ep, err := rt.WaitReady(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func podCount(t *testing.T, ns string) int {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// TestPodsPassRestrictedAdmission runs a sandbox in a namespace that
// enforces the restricted pod security standard: the API server's own
// PodSecurity admission would refuse a pod that broke any of its rules.
func TestPodsPassRestrictedAdmission(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx := context.Background()
	nsObj, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := env.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod that breaks the standard is refused here, proving the
	// admission runs.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root-pod"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: sandboxImage}}}}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Fatalf("a pod breaking the restricted standard was not refused: %v", err)
	}
	s := spec(ns, "restricted-1")
	if err := rt.Create(ctx, s); err != nil {
		t.Fatalf("create under restricted admission: %v", err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), s.ServerID) })
	waitReady(t, rt, s.ServerID)
	pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, s.ServerID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"app.kubernetes.io/name": "berth-sandbox", "app.kubernetes.io/managed-by": "berth",
		"berth.dev/server": s.ServerID, "berth.dev/client": "c1", "berth.dev/owner": "u1"} {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q", k, pod.Labels[k])
		}
	}
	secret, err := env.Client.CoreV1().Secrets(ns).Get(ctx, s.ServerID+"-agent-token", metav1.GetOptions{})
	if err != nil || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("token secret %+v %v, want it owned by the pod", secret.OwnerReferences, err)
	}
	if strings.Contains(pod.String(), token) {
		t.Fatal("the agent token is in the pod")
	}
	// get_server shows the pod's events: the scheduler's at least.
	var reasons []string
	end := time.Now().Add(deadline)
	for !slices.Contains(reasons, "Scheduled") {
		if time.Now().After(end) {
			t.Fatalf("events of the sandbox: %v, want Scheduled among them", reasons)
		}
		events, err := rt.Events(ctx, s.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		reasons = reasons[:0]
		for _, e := range events {
			reasons = append(reasons, e.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRefusedBeforeAnythingIsCreated: an unknown runtime class, an
// invalid image, a bad id, resources over the namespace's LimitRange and
// a namespace berth does not manage are refused naming the field, and no
// pod appears.
func TestRefusedBeforeAnythingIsCreated(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx := context.Background()
	max := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	if _, err := env.Client.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "max"},
		Spec:       corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: max}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		edit  func(*runtime.Spec)
		words string
	}{
		{"unknown runtime class", func(s *runtime.Spec) { s.RuntimeClassName = "no-such-class" }, "runtime_class_name"},
		{"invalid image", func(s *runtime.Spec) { s.ImageTag = "Not A/Valid:Image" }, "image_tag"},
		{"bad id", func(s *runtime.Spec) { s.ServerID = "Bad_ID" }, "server id"},
		{"over the limit range", func(s *runtime.Spec) { s.Resources.Memory = "2Gi" }, "resources.memory"},
		{"unmanaged namespace", func(s *runtime.Spec) { s.Namespace = "kube-system" }, "kube-system"},
	} {
		s := spec(ns, "refused")
		c.edit(&s)
		err := rt.Create(ctx, s)
		if err == nil || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.words)
		}
	}
	if n := podCount(t, ns); n != 0 {
		t.Fatalf("%d pods were created by refused starts", n)
	}
}

// TestPodDeletedBehindBerthsBack: the runtime reports the exit at once.
func TestPodDeletedBehindBerthsBack(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	exits := map[string]string{}
	rt.Watch(ctx, func(e runtime.Exit) {
		mu.Lock()
		exits[e.ServerID] = e.Reason
		mu.Unlock()
	})
	s := spec(ns, "doomed")
	if err := rt.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitReady(t, rt, s.ServerID)
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, s.ServerID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for {
		mu.Lock()
		reason, ok := exits[s.ServerID]
		mu.Unlock()
		if ok {
			if !strings.Contains(reason, "deleted") {
				t.Fatalf("exit reason %q", reason)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("the deleted pod was not reported")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _ := rt.Status(ctx, s.ServerID); st.State == runtime.StateReady {
		t.Fatalf("status after deletion: %+v", st)
	}
}

// TestNodeHolders holds nodes for a client: one pause pod per node, by
// anti-affinity, then releases them.
func TestNodeHolders(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{})
	ctx := context.Background()
	if err := rt.HoldNodes(ctx, ns, "client-7", len(env.Nodes)); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(deadline)
	for {
		n, err := rt.HeldNodes(ctx, ns, "client-7")
		if err != nil {
			t.Fatal(err)
		}
		if n == len(env.Nodes) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d nodes held", n, len(env.Nodes))
		}
		time.Sleep(50 * time.Millisecond)
	}
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "berth.dev/node-holder=client-7"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			nodes[p.Spec.NodeName] = true
		}
	}
	if len(nodes) != len(env.Nodes) {
		t.Fatalf("holder pods on %d distinct nodes, want %d", len(nodes), len(env.Nodes))
	}
	if err := rt.HoldNodes(ctx, ns, "client-7", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := rt.HeldNodes(ctx, ns, "client-7"); err != nil || n != 0 {
		t.Fatalf("after release: %d held, %v", n, err)
	}
}
