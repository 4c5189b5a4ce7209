package kubetest

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Not parallel: SetKanikoExit is the kubelet's, shared by the package.
func TestKanikoRecordsBuild(t *testing.T) {
	e := need(t)
	ns := e.Namespace(t, "kaniko")
	ctx := context.Background()
	if _, err := e.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "dockerfile"},
		Data:       map[string]string{"Dockerfile": "FROM ubuntu:24.04\nRUN apt-get install -y git\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "registry"},
		Type:       corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{".dockerconfigjson": `{"auths":{"registry.test":{"auth":"eDp5"}}}`},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	build := func(name string) *corev1.Pod {
		create(t, e, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "kaniko", Image: "gcr.io/kaniko-project/executor:v1.23.2",
					Args: []string{"--dockerfile=/workspace/Dockerfile", "--context=dir:///workspace", "--destination=registry.test/img:" + name},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "dockerfile", MountPath: "/workspace"},
						{Name: "registry", MountPath: "/kaniko/.docker"},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "dockerfile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dockerfile"}}}},
					{Name: "registry", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "registry", Items: []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json"}}}}},
				},
			},
		})
		return e.WaitPod(t, ns, name, func(p *corev1.Pod) bool {
			return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
		})
	}
	if p := build("ok"); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("build pod phase %s, want Succeeded", p.Status.Phase)
	}
	e.Kubelet.SetKanikoExit(1)
	defer e.Kubelet.SetKanikoExit(0)
	p := build("fails")
	if p.Status.Phase != corev1.PodFailed {
		t.Fatalf("failing build pod phase %s, want Failed", p.Status.Phase)
	}
	if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 1 {
		t.Fatalf("failing build state %+v", p.Status.ContainerStatuses[0].State)
	}
	logs, err := e.Client.CoreV1().Pods(ns).GetLogs("fails", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "error building image") {
		t.Errorf("failed build log %q, %v", logs, err)
	}
	var runs []KanikoRun
	for _, r := range e.Kubelet.KanikoRuns() {
		if r.Namespace == ns {
			runs = append(runs, r)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d kaniko runs recorded, want 2: %+v", len(runs), runs)
	}
	r := runs[0]
	if r.Dockerfile != "FROM ubuntu:24.04\nRUN apt-get install -y git\n" {
		t.Errorf("Dockerfile %q (%s)", r.Dockerfile, r.DockerfileError)
	}
	if len(r.Destinations) != 1 || r.Destinations[0] != "registry.test/img:ok" {
		t.Errorf("destinations %v", r.Destinations)
	}
	if !strings.Contains(r.DockerConfig, "registry.test") {
		t.Errorf("docker config %q", r.DockerConfig)
	}
	if r.Args[0] != "--dockerfile=/workspace/Dockerfile" || r.ExitCode != 0 || runs[1].ExitCode != 1 {
		t.Errorf("runs %+v", runs)
	}
}
