package kube_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
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
		for _, want := range []string{"kind: Deployment", "kind: Role", "kind: NetworkPolicy", "kind: PodDisruptionBudget", "readOnlyRootFilesystem: true", "name: berth-egress"} {
			if !strings.Contains(rendered, want) {
				t.Errorf("%s renders without %q", overlay, want)
			}
		}
		run("apply", "--server-side", "--dry-run=server", "-k", dir)
	}
}

// TestShippedEgressPolicy: the NetworkPolicy deploy/ ships lets sandbox
// pods reach berth's pods on the egress gateway's ports and nothing
// else, and those are the ports berth listens on and its egress
// Service's targets: a drift between them would cut every sandbox off,
// or open a way around the gateway.
func TestShippedEgressPolicy(t *testing.T) {
	objs := map[string]k8sruntime.Object{}
	for _, f := range []string{"networkpolicies.yaml", "service.yaml", "deployment.yaml", "config.yaml"} {
		for _, o := range decodeAll(t, "../../../deploy/base/"+f) {
			objs[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.(metav1.Object).GetName()] = o
		}
	}
	np := objs["NetworkPolicy/berth-sandboxes"].(*networkingv1.NetworkPolicy)
	if len(np.Spec.Egress) != 1 || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Fatalf("sandbox egress rules: %+v (types %v), want exactly one, to berth", np.Spec.Egress, np.Spec.PolicyTypes)
	}
	rule := np.Spec.Egress[0]
	if len(rule.To) != 1 || rule.To[0].IPBlock != nil || rule.To[0].PodSelector == nil ||
		rule.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "berth" ||
		rule.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "berth" {
		t.Fatalf("sandbox egress goes to %+v, want berth's pods only", rule.To)
	}
	allowed := map[string]bool{}
	for _, p := range rule.Ports {
		allowed[fmt.Sprintf("%s/%d", *p.Protocol, p.Port.IntValue())] = true
	}
	// What berth listens on (the ConfigMap's flags) and exposes.
	cm := objs["ConfigMap/berth"].(*corev1.ConfigMap)
	want := map[string]bool{}
	for flag, protos := range map[string][]string{"BERTH_KUBE_EGRESS_LISTEN": {"TCP"}, "BERTH_KUBE_EGRESS_DNS_LISTEN": {"UDP", "TCP"}} {
		_, port, err := net.SplitHostPort(cm.Data[flag])
		if err != nil {
			t.Fatalf("%s=%q: %v", flag, cm.Data[flag], err)
		}
		for _, proto := range protos {
			want[proto+"/"+port] = true
		}
	}
	if !maps.Equal(allowed, want) {
		t.Errorf("sandbox pods may reach berth on %v; berth's egress listens on %v", allowed, want)
	}
	ports := map[string]string{}
	for _, p := range objs["Deployment/berth"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = fmt.Sprintf("%s/%d", p.Protocol, p.ContainerPort)
	}
	svc := objs["Service/berth-egress"].(*corev1.Service)
	var dns53 int
	for _, p := range svc.Spec.Ports {
		target := ports[p.TargetPort.String()]
		if !want[target] || !strings.HasPrefix(target, string(p.Protocol)+"/") {
			t.Errorf("Service port %s targets %q (%s), not an egress listener", p.Name, p.TargetPort.String(), target)
		}
		if p.Port == 53 {
			dns53++
		}
	}
	if dns53 != 2 {
		t.Errorf("the egress Service serves DNS on port 53 %d times, want UDP and TCP (a resolv.conf names no port)", dns53)
	}
	berth := objs["NetworkPolicy/berth"].(*networkingv1.NetworkPolicy)
	reachable := map[string]bool{}
	for _, r := range berth.Spec.Ingress {
		for _, from := range r.From {
			if from.PodSelector != nil && from.PodSelector.MatchLabels["app.kubernetes.io/name"] == "berth-sandbox" {
				for _, p := range r.Ports {
					reachable[fmt.Sprintf("%s/%d", *p.Protocol, p.Port.IntValue())] = true
				}
			}
		}
	}
	if !maps.Equal(reachable, want) {
		t.Errorf("berth's pods admit sandbox pods on %v, want %v", reachable, want)
	}
}

// decodeAll decodes every object of a YAML file of deploy/.
func decodeAll(t testing.TB, path string) []k8sruntime.Object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sruntime.Object
	dec := yaml.NewYAMLReader(bufioReader(raw))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
}
