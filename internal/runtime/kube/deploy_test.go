package kube_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeployOverlaysApply renders every overlay of deploy/ with kubectl's
// kustomize and applies it to the API server with a server-side dry run,
// so the manifests are known valid against a real API server (schemas,
// admission, the restricted pod security the namespaces enforce).
func TestDeployOverlaysApply(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	kubectl := env.Kubectl
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Objects in a namespace that a dry run only pretends to create are
	// refused, so the namespaces are created for real first.
	run("apply", "--server-side", "-f", "../../../deploy/base/namespaces.yaml")
	for _, overlay := range []string{"dev", "production"} {
		dir := "../../../deploy/overlays/" + overlay
		rendered := run("kustomize", dir)
		for _, want := range []string{"kind: Deployment", "kind: Role", "kind: NetworkPolicy", "kind: PodDisruptionBudget", "readOnlyRootFilesystem: true"} {
			if !strings.Contains(rendered, want) {
				t.Errorf("%s renders without %q", overlay, want)
			}
		}
		run("apply", "--server-side", "--dry-run=server", "-k", dir)
	}
}
