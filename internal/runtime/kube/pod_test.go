package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-mcp/berth/internal/runtime"
)

func testRuntime(t *testing.T) *Runtime {
	t.Helper()
	return &Runtime{opts: Options{AgentImage: "ghcr.io/berth-mcp/berth-agent:1", RunAsUser: DefaultRunAsUser, Namespaces: []string{"team-a"}, ImagePullPolicy: corev1.PullIfNotPresent},
		defaults: defaults{cpu: resource.MustParse("1"), memory: resource.MustParse("2Gi"), workspace: resource.MustParse("10Gi"), tmp: resource.MustParse("1Gi")}}
}

// TestPodIsRestricted asserts every field of the Kubernetes "restricted"
// pod security standard on the pod berth creates, and the rest of what a
// sandbox pod must be.
func TestPodIsRestricted(t *testing.T) {
	r := testRuntime(t)
	spec := runtime.Spec{ServerID: "0f8e9d2c-1111-2222-3333-444455556666", Namespace: "team-a", ClientID: "c1", OwnerID: "u1",
		ImageTag: "python:3.12", RuntimeClassName: "gvisor", AgentToken: "secret-token-secret-token-secret-token", Env: map[string]string{"B": "2", "A": "1"}}
	res, err := r.resourcesFor(runtime.Spec{Resources: runtime.Resources{CPU: "500m", Memory: "1Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	pod := r.podFor(spec, res)
	ps := pod.Spec
	if ps.SecurityContext == nil || !*ps.SecurityContext.RunAsNonRoot || *ps.SecurityContext.RunAsUser != DefaultRunAsUser ||
		ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", ps.SecurityContext)
	}
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Error("the pod gets a service account token, service links or host namespaces")
	}
	if ps.ShareProcessNamespace == nil || !*ps.ShareProcessNamespace {
		t.Error("the agent would be pid 1 of its process namespace: nothing reaps orphans")
	}
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != "gvisor" || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("runtime class %v, restart policy %s", ps.RuntimeClassName, ps.RestartPolicy)
	}
	for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		sc := c.SecurityContext
		if sc == nil || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || (sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
		if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s has no limits", c.Name)
		}
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a host path", v.Name)
		}
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil {
			t.Errorf("emptyDir %s has no size limit", v.Name)
		}
	}
	sandbox := ps.Containers[0]
	if sandbox.Image != "python:3.12" || sandbox.Command[0] != "/berth/berth-agent" || sandbox.ReadinessProbe.HTTPGet.Path != "/api/health" {
		t.Errorf("sandbox container %+v", sandbox)
	}
	if got := sandbox.Resources.Limits.Cpu().String(); got != "500m" || sandbox.Resources.Requests.Memory().String() != "1Gi" {
		t.Errorf("resources %+v", sandbox.Resources)
	}
	if ps.InitContainers[0].Image != r.opts.AgentImage || !slices.Equal(ps.InitContainers[0].Command, []string{"/berth-agent", "install", "/berth"}) {
		t.Errorf("init container %+v", ps.InitContainers[0])
	}
	for k, v := range map[string]string{labelName: sandboxName, labelManagedBy: managedBy, labelServer: spec.ServerID, labelClient: "c1", labelOwner: "u1"} {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	text := pod.String()
	if strings.Contains(text, spec.AgentToken) {
		t.Error("the agent token is in the pod spec")
	}
	secret := secretFor(spec, pod)
	if string(secret.Data[tokenKey]) != spec.AgentToken+"\n" || secret.OwnerReferences[0].Kind != "Pod" || !*secret.Immutable {
		t.Errorf("token secret %+v", secret)
	}
}

func TestFieldChecks(t *testing.T) {
	if err := checkImage("not a valid/Image:ref"); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("bad image: %v", err)
	}
	if err := checkImage("ghcr.io/org/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"); err != nil {
		t.Errorf("digest reference refused: %v", err)
	}
	if err := checkLabel("namespace", "Team_A"); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("bad namespace: %v", err)
	}
	r := testRuntime(t)
	if _, err := r.resourcesFor(runtime.Spec{Resources: runtime.Resources{Memory: "lots"}}); err == nil || !strings.Contains(err.Error(), "resources.memory") {
		t.Errorf("bad memory: %v", err)
	}
}

func TestStateOfPods(t *testing.T) {
	waiting := func(init bool, reason, msg string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
		cs := []corev1.ContainerStatus{{Name: "x", Image: "img", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
		if init {
			p.Status.InitContainerStatuses = cs
		} else {
			p.Status.ContainerStatuses = cs
		}
		return p
	}
	ready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	oom := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}}}
	// A real kubelet's report of a killed process: no signal field,
	// 128 plus the signal's number.
	killed := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137}}}}}}
	evicted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
		Message: `Usage of EmptyDir volume "workspace" exceeds the limit "64Mi". `, ContainerStatuses: killed.Status.ContainerStatuses}}
	// The agent stopped by SIGTERM, the pod not yet terminal: the kubelet
	// will say why.
	stopped := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}}}}}}
	unschedulable := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}}}}
	for _, c := range []struct {
		name  string
		pod   *corev1.Pod
		state runtime.State
		words string
	}{
		{"ready", ready, runtime.StateReady, ""},
		{"image pull", waiting(false, "ErrImagePull", "not found"), runtime.StateFailed, "ErrImagePull"},
		{"pull back-off of the agent image", waiting(true, "ImagePullBackOff", "Back-off"), runtime.StateFailed, "init container x"},
		{"crash loop", waiting(false, "CrashLoopBackOff", "back-off 10s"), runtime.StateFailed, "CrashLoopBackOff"},
		{"creating", waiting(false, "ContainerCreating", ""), runtime.StatePending, "ContainerCreating"},
		{"out of memory", oom, runtime.StateFailed, "OOMKilled"},
		{"killed", killed, runtime.StateFailed, "exit code 137 (killed by signal 9)"},
		{"stopping", stopped, runtime.StatePending, "the kubelet is stopping its pod"},
		{"evicted", evicted, runtime.StateFailed, `evicted: Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".`},
		{"unschedulable", unschedulable, runtime.StateFailed, "Insufficient memory"},
	} {
		st := stateOf(c.pod)
		if st.State != c.state || !strings.Contains(st.Message, c.words) {
			t.Errorf("%s: %+v, want %s naming %q", c.name, st, c.state, c.words)
		}
	}
	if ep := stateOf(ready).Endpoint; ep.Network != "tcp" || ep.Address != "10.0.0.7:7070" {
		t.Errorf("endpoint %+v", ep)
	}
}

// TestPullPolicy: with no policy configured a sandbox's image by tag is
// asked of the registry at every start (as the local runtime does), by
// digest pulled once; the operator's images are pulled once; a
// configured policy is every container's.
func TestPullPolicy(t *testing.T) {
	r := testRuntime(t)
	r.opts.ImagePullPolicy = ""
	digest := "@sha256:" + strings.Repeat("ab", 32)
	for ref, want := range map[string]corev1.PullPolicy{
		"python:3.12": corev1.PullAlways, "python": corev1.PullAlways, "127.0.0.1:5000/team/app:1": corev1.PullAlways,
		"python" + digest: corev1.PullIfNotPresent, "python:3.12" + digest: corev1.PullIfNotPresent,
	} {
		pod := r.podFor(runtime.Spec{ServerID: "s1", Namespace: "team-a", ImageTag: ref}, corev1.ResourceRequirements{})
		if got := pod.Spec.Containers[0].ImagePullPolicy; got != want {
			t.Errorf("sandbox image %s: pull policy %s, want %s", ref, got, want)
		}
		if got := pod.Spec.InitContainers[0].ImagePullPolicy; got != corev1.PullIfNotPresent {
			t.Errorf("agent image with sandbox image %s: pull policy %s, want IfNotPresent", ref, got)
		}
	}
	r.opts.ImagePullPolicy = corev1.PullNever
	pod := r.podFor(runtime.Spec{ServerID: "s1", Namespace: "team-a", ImageTag: "python:3.12"}, corev1.ResourceRequirements{})
	if pod.Spec.Containers[0].ImagePullPolicy != corev1.PullNever || pod.Spec.InitContainers[0].ImagePullPolicy != corev1.PullNever {
		t.Errorf("configured Never: sandbox %s, agent %s", pod.Spec.Containers[0].ImagePullPolicy, pod.Spec.InitContainers[0].ImagePullPolicy)
	}
}
