package kubetest

import (
	"os/exec"
	"strings"
	"testing"
)

// kubectl of the same version talks to the control plane: a server-side
// dry run (how manifests are checked against the real API) and a get.
func TestKubectl(t *testing.T) {
	e := need(t)
	t.Parallel()
	if e.Kubectl == "" {
		t.Fatalf("no kubectl in %s; run `make kubeenv`", "$"+BinEnv)
	}
	ns := e.Namespace(t, "kubectl")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  runtime: kubernetes\n"
	apply := exec.Command(e.Kubectl, "--kubeconfig", e.Kubeconfig, "-n", ns, "apply", "--dry-run=server", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	out, err := apply.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configmap/flags created (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server: %v: %s", err, out)
	}
	out, err = exec.Command(e.Kubectl, "--kubeconfig", e.Kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil || strings.Count(string(out), "node/kubetest-node-") != len(e.Nodes) {
		t.Fatalf("kubectl get nodes: %v: %s", err, out)
	}
}
