package egress

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	dns := startTestDNS(t, map[string][]string{
		"pypi.test":       {"203.0.113.10", "2001:db8:203::10"},
		"rebind.test":     {"127.0.0.1"},
		"private.test":    {"10.0.0.5"},
		"meta.test":       {"169.254.169.254"},
		"mixed.test":      {"10.0.0.6", "203.0.113.11"},
		"api.github.test": {"203.0.113.12"},
		"evil.test":       {"203.0.113.13"},
		"loopback.test":   {"127.0.0.1"},
	})
	policy := Policy{Egress: Allowlist, Allow: []string{"pypi.test", "*.github.test:443", "rebind.test", "private.test",
		"meta.test", "mixed.test", "203.0.113.100/30", "10.0.0.9"}}
	d := &decider{
		guard:    &Guard{Reachable: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:203::/48")}},
		resolver: dns.resolver(),
		policy:   func(context.Context) (Policy, error) { return policy, nil },
		memory:   newMemory(),
	}
	ctx := context.Background()
	tgt := func(host string, port uint16) target {
		tg, err := parseTarget(host, port)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		return tg
	}
	for _, tc := range []struct {
		host   string
		port   uint16
		want   []string // allowed addresses, in order
		reason string   // or the refusal
	}{
		{"pypi.test", 443, []string{"203.0.113.10:443", "[2001:db8:203::10]:443"}, ""},
		{"PYPI.test.", 80, []string{"203.0.113.10:80", "[2001:db8:203::10]:80"}, ""},
		{"api.github.test", 443, []string{"203.0.113.12:443"}, ""},
		{"api.github.test", 22, nil, "not in allowlist"},
		{"github.test", 443, nil, "not in allowlist"},
		{"evil.test", 443, nil, "not in allowlist"},
		{"rebind.test", 443, nil, "loopback"}, // allowed name, refused address: DNS rebinding
		{"private.test", 5432, nil, "private range"},
		{"meta.test", 80, nil, "cloud metadata"},
		{"mixed.test", 443, []string{"203.0.113.11:443"}, ""}, // only the addresses that pass are dialled
		{"203.0.113.101", 443, []string{"203.0.113.101:443"}, ""},
		{"203.0.113.13", 443, nil, "not in allowlist"},
		{"10.0.0.9", 443, nil, "private range"}, // in the allowlist, but no policy lifts the address rule
	} {
		addrs, err := d.decide(ctx, tgt(tc.host, tc.port))
		var got []string
		for _, a := range addrs {
			got = append(got, a.String())
		}
		if tc.reason == "" {
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%s:%d: %v, %v; want %v", tc.host, tc.port, got, err, tc.want)
			}
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Reason != tc.reason {
			t.Errorf("%s:%d: %v, %v; want refusal %q", tc.host, tc.port, got, err, tc.reason)
		}
	}

	// A name the gateway's DNS answered makes its address count as the name.
	evil := tgt("203.0.113.13", 443)
	d.memory.remember("api.github.test", netip.MustParseAddr("203.0.113.13"), time.Now())
	if _, err := d.decide(ctx, evil); err != nil {
		t.Errorf("address remembered for an allowed name refused: %v", err)
	}
	if _, err := d.decide(ctx, tgt("203.0.113.13", 22)); err == nil {
		t.Error("remembered address allowed on a port the entry does not give")
	}

	// The policy is read for every decision.
	policy = Policy{Egress: None}
	var r *Refusal
	if _, err := d.decide(ctx, tgt("pypi.test", 443)); !errors.As(err, &r) || r.Reason != "policy none" {
		t.Errorf("after the policy became none: %v", err)
	}
	policy = Policy{Egress: Public}
	if _, err := d.decide(ctx, tgt("evil.test", 443)); err != nil {
		t.Errorf("public policy refused a reachable name: %v", err)
	}
	if _, err := d.decide(ctx, tgt("loopback.test", 443)); !errors.As(err, &r) || r.Reason != "loopback" || r.Name != "loopback.test" {
		t.Errorf("public policy and a name resolving to loopback: %v", err)
	}
	if _, err := d.decide(ctx, tgt("nosuch.test", 443)); err == nil || errors.As(err, &r) {
		t.Errorf("unknown name: %v, want a resolution error", err)
	}
	if _, err := parseTarget("bad name!", 443); !errors.As(err, &r) || r.Reason != "invalid name" {
		t.Errorf("invalid name: %v", err)
	}
}

func TestMemoryBounded(t *testing.T) {
	m := newMemory()
	now := time.Now()
	base := netip.MustParseAddr("203.0.113.1")
	m.remember("first.test", base, now)
	for i := range memoryEntries {
		m.remember("n.test", netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), now)
	}
	if got := m.names(base, now); len(got) != 0 {
		t.Errorf("oldest pair kept past the bound: %v", got)
	}
	m.remember("again.test", base, now)
	if got := m.names(base, now); !slices.Equal(got, []string{"again.test"}) {
		t.Errorf("names = %v", got)
	}
	if got := m.names(base, now.Add(memoryTTL+time.Second)); len(got) != 0 {
		t.Errorf("expired pair still given: %v", got)
	}
	total := 0
	for _, names := range m.byAddr {
		total += len(names)
	}
	if total > memoryEntries {
		t.Errorf("%d pairs held, bound %d", total, memoryEntries)
	}
}
