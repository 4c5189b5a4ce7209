package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
)

// TestKanikoBuilds builds an image as a Kaniko Job (the kubelet stand-in
// records what the executor was given): the Dockerfile holds the base,
// the files and the commands, the registry credentials are where Kaniko
// reads them, and the build's environment values are in none of the
// Dockerfile, the Job spec or the log. A failing executor fails the build
// with the reason.
func TestKanikoBuilds(t *testing.T) {
	rt, ns := newRuntime(t, kube.Options{ImageRegistry: "registry.test/builds", RegistrySecret: "push-creds"})
	ctx := context.Background()
	creds := `{"auths":{"registry.test":{"auth":"dXNlcjpwYXNz"}}}`
	if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "push-creds"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(creds)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const secretValue = "s3cr3t-build-value"
	b := runtime.ImageBuild{
		ID: "build-tools-abc123", Namespace: ns, OwnerID: "u1", Name: "tools", Base: "python:3.12",
		Commands: []string{"pip install -r requirements.txt", "echo \"$TOKEN\" | wc -c"},
		Env:      map[string]string{"TOKEN": secretValue},
		Files:    []runtime.File{{Path: "requirements.txt", Content: "requests\n"}},
	}
	res, err := rt.BuildImage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != "registry.test/builds/tools:build-tools-abc123" {
		t.Fatalf("built image %q", res.Image)
	}
	runs := env.Kubelet.KanikoRuns()
	var run *struct{ Dockerfile, DockerConfig string }
	for _, r := range runs {
		if r.Namespace == ns {
			run = &struct{ Dockerfile, DockerConfig string }{r.Dockerfile, r.DockerConfig}
			if !strings.Contains(strings.Join(r.Destinations, " "), res.Image) {
				t.Errorf("destinations %v", r.Destinations)
			}
			for k, v := range r.Env {
				if strings.Contains(v, secretValue) {
					t.Errorf("the build's env value is in the executor's environment (%s)", k)
				}
			}
		}
	}
	if run == nil {
		t.Fatal("no Kaniko run recorded")
	}
	for _, want := range []string{"FROM python:3.12", `COPY ["file-0","/workspace/requirements.txt"]`, "pip install -r requirements.txt"} {
		if !strings.Contains(run.Dockerfile, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, run.Dockerfile)
		}
	}
	if strings.Contains(run.Dockerfile, secretValue) || strings.Contains(res.Log, secretValue) {
		t.Error("the build's env value is in the Dockerfile or the log")
	}
	if run.DockerConfig != creds {
		t.Errorf("registry credentials seen by Kaniko: %q", run.DockerConfig)
	}
	job, err := env.Client.BatchV1().Jobs(ns).Get(ctx, b.ID, metav1.GetOptions{})
	if err != nil || strings.Contains(job.String(), secretValue) {
		t.Fatalf("the build's env value is in the Job spec (or the Job is missing: %v)", err)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, b.ID+"-env", metav1.GetOptions{}); err == nil {
		t.Error("the build's environment Secret outlived the build")
	}

	env.Kubelet.SetKanikoExit(1)
	defer env.Kubelet.SetKanikoExit(0)
	b.ID = "build-tools-def456"
	_, err = rt.BuildImage(ctx, b)
	var failed *runtime.BuildFailed
	if !errors.As(err, &failed) || !strings.Contains(failed.Reason, "Kaniko job failed") {
		t.Fatalf("a failing executor: %v", err)
	}
}
