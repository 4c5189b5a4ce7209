package kubetest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// agentBin builds berth-agent once for the package, into env's folder.
var agentBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(env.Dir, "bin", "berth-agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/berth-mcp/berth/cmd/berth-agent").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

// The pod the Kubernetes runtime is to make, in its essentials: the real
// berth-agent copied by an init container from an agent image into an
// emptyDir, run from there as any image's entrypoint with its workspace
// on a second emptyDir, its token from a Secret, listening on its pod IP,
// Ready by a readiness probe on /api/health.
func TestBerthAgentPod(t *testing.T) {
	e := need(t)
	t.Parallel()
	bin, err := agentBin()
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t, "agent")
	e.Kubelet.AddImage("registry.test/berth-agent:dev", Image{Files: map[string]string{"/berth-agent": bin}})
	token := strings.Repeat("t0k3n", 8)
	if _, err := e.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-token"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("1Gi")
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "srv-1", Namespace: ns},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "install-agent", Image: "registry.test/berth-agent:dev",
				Command:      []string{"cp", "/berth-agent", "/agent/berth-agent"},
				VolumeMounts: []corev1.VolumeMount{{Name: "agent", MountPath: "/agent"}},
			}},
			Containers: []corev1.Container{{
				Name: "sandbox", Image: "ubuntu:24.04",
				Command: []string{"/agent/berth-agent", "--workspace=/workspace", "--token-file=/var/run/berth/token"},
				Env: []corev1.EnvVar{
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "BERTH_AGENT_LISTEN", Value: "$(POD_IP):7070"},
				},
				Ports: []corev1.ContainerPort{{Name: "agent", ContainerPort: 7070}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent", MountPath: "/agent", ReadOnly: true},
					{Name: "workspace", MountPath: "/workspace"},
					{Name: "token", MountPath: "/var/run/berth", ReadOnly: true},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/api/health", Port: intstr.FromString("agent")}},
					PeriodSeconds: 1,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "agent-token"}}},
			},
		},
	})
	p := e.WaitPod(t, ns, "srv-1", ready)
	url := "http://" + p.Status.PodIP + ":7070/api/capabilities"
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s with the Secret's token: %s", url, resp.Status)
	}
	tm, ok := e.Kubelet.Timing(p.UID)
	if !ok || tm.Seen.IsZero() || tm.Started.Before(tm.Seen) || tm.Ready.Before(tm.Started) {
		t.Fatalf("timing %+v, %v: want Seen <= Started <= Ready", tm, ok)
	}
	t.Logf("kubelet: bound to process started %s, to Ready %s", tm.Started.Sub(tm.Seen), tm.Ready.Sub(tm.Seen))
}

// A workspace grown past its emptyDir sizeLimit gets the pod evicted.
func TestEmptyDirSizeLimitEvicts(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "evict")
	limit := resource.MustParse("1Mi")
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox",
				Command:      []string{"sh", "-c", "head -c 2097152 /dev/zero > /workspace/big && sleep 1000"},
				VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}},
			}},
			Volumes: []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}},
		},
	})
	p := e.WaitPod(t, ns, "filler", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "exceeds the limit") {
		t.Fatalf("failed pod reason %q message %q, want Evicted for the emptyDir", p.Status.Reason, p.Status.Message)
	}
}

// A container past its memory limit is OOM-killed and reported so.
func TestMemoryLimitOOMKilled(t *testing.T) {
	e := need(t)
	t.Parallel()
	if !e.Kubelet.MemoryLimitsEnforced() {
		t.Skip("memory cgroups cannot be made here (not root?): limits.memory is not enforced")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t, "oom")
	e.Kubelet.AddImage("kubetest/hog:1", Image{Entrypoint: []string{"/hog"}, Files: map[string]string{"/hog": self}})
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: "kubetest/hog:1",
				Env:       []corev1.EnvVar{{Name: helperEnv, Value: "1"}, {Name: "HELPER_ALLOC_MIB", Value: "256"}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			}},
		},
	})
	p := e.WaitPod(t, ns, "hog", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodFailed })
	if st := p.Status.ContainerStatuses[0].State.Terminated; st == nil || st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Fatalf("state %+v, want terminated OOMKilled with exit code 137", p.Status.ContainerStatuses[0].State)
	}
}
