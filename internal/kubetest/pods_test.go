package kubetest

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ready reports the pod's Ready condition.
func ready(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waiting is true when the pod's first container waits for reason.
func waiting(reason string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == reason
	}
}

func create(t *testing.T, e *Env, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := e.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return p
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// The agent's way into any image: an init container copies a binary from
// its image into an emptyDir, the main container runs it from there,
// binding its pod IP, and a readiness probe makes the pod Ready.
func TestPodInitContainerEmptyDirReadiness(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "init-readiness")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.Kubelet.AddImage("kubetest/agent:1", Image{Files: map[string]string{"/helper": self}})
	if _, err := e.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "token"},
		Data:       map[string][]byte{"token": []byte("s3cret")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limit := resource.MustParse("64Mi")
	pod := create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "install", Image: "kubetest/agent:1",
				Command:      []string{"sh", "-c", "cp /helper /agent/helper"},
				VolumeMounts: []corev1.VolumeMount{{Name: "agent", MountPath: "/agent"}},
			}},
			Containers: []corev1.Container{{
				Name: "sandbox", Image: "ubuntu:24.04",
				Command:    []string{"/agent/helper"},
				WorkingDir: "/workspace",
				Env: []corev1.EnvVar{
					{Name: helperEnv, Value: "1"},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "HELPER_ADDR", Value: "$(POD_IP):8080"},
					{Name: "HELPER_WRITE", Value: "/workspace/hello"},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
					{Name: "TOKEN_FILE", Value: "/etc/token/token"},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "agent", MountPath: "/agent"},
					{Name: "workspace", MountPath: "/workspace"},
					{Name: "token", MountPath: "/etc/token", ReadOnly: true},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "token"}}},
			},
		},
	})
	p := e.WaitPod(t, ns, pod.Name, ready)
	if p.Status.Phase != corev1.PodRunning {
		t.Fatalf("phase %s, want Running", p.Status.Phase)
	}
	if !strings.HasPrefix(p.Status.PodIP, "127.0.") || p.Status.PodIP == "127.0.0.1" {
		t.Fatalf("podIP %q, want a loopback address of its own", p.Status.PodIP)
	}
	if st := p.Status.InitContainerStatuses[0].State.Terminated; st == nil || st.ExitCode != 0 || st.Reason != "Completed" {
		t.Fatalf("init container state %+v, want terminated Completed", p.Status.InitContainerStatuses[0].State)
	}
	base := "http://" + p.Status.PodIP + ":8080"
	if got := get(t, base+"/env?name=POD_NAME"); got != "agent" {
		t.Errorf("POD_NAME %q", got)
	}
	if got := get(t, base+"/env?name=TOKEN"); got != "s3cret" {
		t.Errorf("TOKEN from secretKeyRef %q", got)
	}
	if got := get(t, base+"/file?env=TOKEN_FILE"); got != "s3cret" {
		t.Errorf("secret volume file %q", got)
	}
	if got := get(t, base+"/file?env=HELPER_WRITE"); got != "written by helper\n" {
		t.Errorf("emptyDir file %q", got)
	}
	// pods/log goes through kube-apiserver to the kubelet's endpoint.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs, err := e.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "sandbox"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pods/log: %v", err)
	}
	if want := "helper serving on " + p.Status.PodIP + ":8080"; !strings.Contains(string(logs), want) {
		t.Fatalf("pods/log = %q, want %q", logs, want)
	}
	one, two := int64(1), int64(6)
	logs, err = e.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "sandbox", TailLines: &one, LimitBytes: &two}).DoRaw(ctx)
	if err != nil || string(logs) != "helper" {
		t.Fatalf("pods/log tailLines=1 limitBytes=6: %q, %v", logs, err)
	}
}

func TestMissingImagePullBackOff(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "missing-image")
	e.Kubelet.MissingImage("registry.invalid/nothing:1")
	start := time.Now()
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nopull", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/nothing:1", Command: []string{"true"},
		}}},
	})
	e.WaitPod(t, ns, "nopull", waiting("ErrImagePull"))
	p := e.WaitPod(t, ns, "nopull", waiting("ImagePullBackOff"))
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("ImagePullBackOff after %s, want within seconds", d)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
	evs, err := e.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs.Items {
		found = found || (ev.Reason == "Failed" && strings.Contains(ev.Message, "Failed to pull image"))
	}
	if !found {
		t.Errorf("no Failed event for the pull among %d events", len(evs.Items))
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "crashloop")
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox", Command: []string{"sh", "-c", "echo dying; exit 3"},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}}},
	})
	p := e.WaitPod(t, ns, "crash", waiting("CrashLoopBackOff"))
	cs := p.Status.ContainerStatuses[0]
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || last.Reason != "Error" || last.Message != "dying\n" {
		t.Errorf("lastState %+v, want terminated with exit code 3, reason Error, the log as message", cs.LastTerminationState)
	}
	if cs.RestartCount < 1 {
		t.Errorf("restartCount %d", cs.RestartCount)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running (a crash-looping pod is Running)", p.Status.Phase)
	}
	// The previous attempt's log is there, as with a kubelet.
	logs, err := e.Client.CoreV1().Pods(ns).GetLogs("crash", &corev1.PodLogOptions{Previous: true}).DoRaw(context.Background())
	if err != nil || !strings.Contains(string(logs), "dying") {
		t.Errorf("previous log %q, %v", logs, err)
	}
}

func TestDeletePodKillsProcess(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "delete")
	grace := int64(10)
	create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "sleep 1000 & wait"}}},
		},
	})
	p := e.WaitPod(t, ns, "sleeper", ready)
	pid := pidOf(t, p.Status.ContainerStatuses[0].ContainerID)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("container process %d not running: %v", pid, err)
	}
	if err := e.Client.CoreV1().Pods(ns).Delete(context.Background(), "sleeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPod(t, ns, "sleeper", func(p *corev1.Pod) bool { return p == nil })
	// The group is gone: neither sh nor its sleep is left.
	if alive := groupAlive(t, pid); len(alive) > 0 {
		t.Fatalf("process group %d still has processes %v after the pod was deleted", pid, alive)
	}
}

// pidOf is the pid in a kubetest containerID (process://<pid>).
func pidOf(t *testing.T, containerID string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimPrefix(containerID, "process://"))
	if err != nil {
		t.Fatalf("containerID %q: %v", containerID, err)
	}
	return pid
}

// groupAlive lists the live (not zombie) processes of process group pgid:
// an orphan reparented to a pid 1 that does not reap stays a zombie.
func groupAlive(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var alive []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			alive = append(alive, pid)
		}
	}
	return alive
}
