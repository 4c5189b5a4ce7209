package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The node's CNI bridge enforces no NetworkPolicy. RestrictPods stands
// in for a network plugin that does (Calico, Cilium, ...) enforcing the
// NetworkPolicy berth ships for sandbox pods ("reach only berth's egress
// address"): nftables rules the node applies itself, on the host, for
// the test's life.

// PodReach is a destination the pods of a restricted node may still
// open connections to: Proto "tcp" or "udp", to Addr:Port.
type PodReach struct {
	Addr  netip.Addr
	Proto string
	Port  uint16
}

// nftTable is the name of a node's nftables table (inet family), which
// the sweep deletes too.
func nftTable(bridge string) string { return "kubetest_" + bridge }

// RestrictPods makes the node's pods reach only reach (and answer what
// is asked of them: the kubelet's probes, berth's calls to their agents)
// until t ends. Everything else a pod sends, to the node's own addresses,
// to another pod, to anywhere beyond, is REJECTED, not dropped: a TCP
// connection is reset and anything else answered "administratively
// prohibited", so that a tool ignoring its proxy settings fails at once
// instead of waiting for a timeout, as it does under the NetworkPolicy of
// a plugin that rejects. The rules are an inet table hooked before
// routing, on every packet that comes in on the node's bridge: IPv4 and
// IPv6 (a pod's link-local address), to the node and bridged between two
// pods (br_netfilter hands those to the IP hooks with the bridge as
// their input device). Neighbour discovery goes on. It skips the test
// where nft is missing (`make node` installs nftables).
func (n *RealNode) RestrictPods(t testing.TB, reach ...PodReach) {
	t.Helper()
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skipf("kubetest: the pods' network rules need nft (apt-get install nftables; make node installs it): %v", err)
	}
	// Pod to pod traffic crosses the bridge without routing: only
	// br_netfilter shows it to the rules.
	for _, f := range []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables"} {
		if b, err := os.ReadFile("/proc/sys/net/bridge/" + f); err != nil || strings.TrimSpace(string(b)) != "1" {
			t.Fatalf("kubetest: pod to pod traffic would bypass the rules: net.bridge.%s is not 1 (modprobe br_netfilter)", f)
		}
	}
	rules, err := n.restrictRules(reach)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubetest: apply the pods' network rules: %v: %s\n%s", err, out, rules)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, nft, "delete", "table", "inet", nftTable(n.bridge)).CombinedOutput(); err != nil {
			t.Errorf("kubetest: remove the pods' network rules: %v: %s", err, out)
		}
	})
}

// restrictRules is RestrictPods' nftables script.
func (n *RealNode) restrictRules(reach []PodReach) (string, error) {
	var allow bytes.Buffer
	for _, r := range reach {
		if r.Proto != "tcp" && r.Proto != "udp" {
			return "", fmt.Errorf("kubetest: pod reach %+v: proto is tcp or udp", r)
		}
		family := "ip"
		if r.Addr.Is6() && !r.Addr.Is4In6() {
			family = "ip6"
		}
		fmt.Fprintf(&allow, "\t\t%s daddr %s %s dport %d accept\n", family, r.Addr.Unmap(), r.Proto, r.Port)
	}
	// Priority -150: after conntrack (-200), which the first rule of
	// "pods" reads, and before any address translation (-100). The node's
	// own packets to its bridge address come in on lo: not a pod's.
	return fmt.Sprintf(`table inet %[1]s {
	chain prerouting {
		type filter hook prerouting priority -150; policy accept;
		iifname %[2]q jump pods
	}
	chain pods {
		ct state established,related accept
%[3]s		icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept
		meta l4proto tcp reject with tcp reset
		reject with icmpx admin-prohibited
	}
}
`, nftTable(n.bridge), n.bridge, allow.String()), nil
}
