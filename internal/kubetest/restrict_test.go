package kubetest

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// TestRestrictRules: the rules RestrictPods applies are ones the kernel
// takes (nft -c checks them without applying), and each reach is a rule.
func TestRestrictRules(t *testing.T) {
	n := &RealNode{bridge: "ktdeadbeef"}
	node := netip.MustParseAddr("10.200.3.1")
	rules, err := n.restrictRules([]PodReach{{Addr: node, Proto: "tcp", Port: 3128}, {Addr: node, Proto: "udp", Port: 53}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ip daddr 10.200.3.1 tcp dport 3128 accept", "ip daddr 10.200.3.1 udp dport 53 accept", `iifname "ktdeadbeef" jump pods`} {
		if !strings.Contains(rules, want) {
			t.Errorf("no %q in\n%s", want, rules)
		}
	}
	if _, err := n.restrictRules([]PodReach{{Addr: node, Proto: "icmp"}}); err == nil {
		t.Error("a reach of proto icmp was taken")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skipf("no nft here: %v", err)
	}
	cmd := exec.Command(nft, "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -c: %v: %s\n%s", err, out, rules)
	}
}
