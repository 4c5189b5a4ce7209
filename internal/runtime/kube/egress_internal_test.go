package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-mcp/berth/internal/runtime"
)

// TestPodEgress: with an egress gateway, a sandbox pod's programs are
// pointed at it (proxy variables, the caller's own winning) and its only
// resolver is berth's; without one the pod is as before.
func TestPodEgress(t *testing.T) {
	r := testRuntime(t)
	spec := runtime.Spec{ServerID: "s1", Namespace: "team-a", ImageTag: "python:3.12", Env: map[string]string{"no_proxy": "mine"}}
	pod := r.podFor(spec, corev1.ResourceRequirements{})
	if pod.Spec.DNSPolicy != "" || pod.Spec.DNSConfig != nil || envOf(pod)["HTTP_PROXY"] != "" {
		t.Fatalf("without egress: dns %q %+v, env %v", pod.Spec.DNSPolicy, pod.Spec.DNSConfig, envOf(pod))
	}
	cfg, err := checkEgress(EgressOptions{Listen: ":3128", DNSListen: ":5353", Address: "10.96.0.53"})
	if err != nil {
		t.Fatal(err)
	}
	r.egressCfg = cfg
	pod = r.podFor(spec, corev1.ResourceRequirements{})
	env := envOf(pod)
	for k, want := range map[string]string{
		"HTTP_PROXY": "http://10.96.0.53:3128", "https_proxy": "http://10.96.0.53:3128", "ALL_PROXY": "socks5h://10.96.0.53:3128",
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "mine",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if pod.Spec.DNSPolicy != corev1.DNSNone || pod.Spec.DNSConfig == nil || strings.Join(pod.Spec.DNSConfig.Nameservers, ",") != "10.96.0.53" ||
		len(pod.Spec.DNSConfig.Searches) != 0 {
		t.Errorf("dns %q %+v, want only berth's resolver", pod.Spec.DNSPolicy, pod.Spec.DNSConfig)
	}
	if !strings.Contains(r.Info().Isolation, "egress gateway at 10.96.0.53") {
		t.Errorf("isolation %q does not say where its network goes", r.Info().Isolation)
	}
}

func envOf(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		if _, dup := out[e.Name]; dup {
			out[e.Name] = "DUPLICATE"
			continue
		}
		out[e.Name] = e.Value
	}
	return out
}

func TestCheckEgress(t *testing.T) {
	for _, o := range []EgressOptions{
		{Listen: ":3128"},                                           // no DNS
		{Listen: ":3128", DNSListen: ":5353"},                       // no address to tell pods
		{Listen: "3128", DNSListen: ":5353", Address: "10.0.0.1"},   // not host:port
		{Listen: ":99999", DNSListen: ":5353", Address: "10.0.0.1"}, // no such port
		{Listen: ":3128", DNSListen: ":5353", Address: "berth.svc"}, // a name: the pods' resolver is berth's
		{DNSListen: ":5353"},
	} {
		if _, err := checkEgress(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	c, err := checkEgress(EgressOptions{Listen: "10.88.0.1:3128", DNSListen: "10.88.0.1:53"})
	if err != nil || c.address.String() != "10.88.0.1" || c.proxyPort != 3128 {
		t.Errorf("address from the listener: %+v %v", c, err)
	}
	if c, err := checkEgress(EgressOptions{}); c != nil || err != nil {
		t.Errorf("no egress: %+v %v", c, err)
	}
}
