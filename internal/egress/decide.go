package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// resolveTimeout bounds each of berth's lookups for a sandbox.
const resolveTimeout = 5 * time.Second

// target is what the sandbox asked to reach: a name or an address, and a
// port (0 for a DNS question).
type target struct {
	name string // normalized; "" when the sandbox gave an address
	addr netip.Addr
	port uint16
}

// parseTarget reads a host as the sandbox gave it: an address literal
// (with or without brackets) or a name.
func parseTarget(host string, port uint16) (target, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		return target{addr: ip.Unmap().WithZone(""), port: port}, nil
	}
	name, err := normalizeName(host)
	if err != nil || strings.Contains(name, "*") {
		return target{}, &Refusal{Name: printable(host), Port: port, Reason: reasonInvalidName, Time: time.Now()}
	}
	return target{name: name, port: port}, nil
}

func (t target) refuse(reason string) *Refusal {
	r := &Refusal{Name: t.name, Port: t.port, Reason: reason, Time: time.Now()}
	if t.addr.IsValid() {
		r.Addr = netip.AddrPortFrom(t.addr, t.port)
	}
	return r
}

// decider applies a sandbox's policy, the Guard and the remembered DNS
// answers to what the sandbox asks for.
type decider struct {
	guard    *Guard
	resolver *net.Resolver
	policy   func(ctx context.Context) (Policy, error)
	memory   *memory
}

// policyEntries reads the policy now, so that a change applies to the
// very next connection or question.
func (d *decider) policyEntries(ctx context.Context) (Mode, []entry, error) {
	p, err := d.policy(ctx)
	if err != nil {
		return "", nil, err
	}
	es, err := p.entries()
	if err != nil {
		return "", nil, err
	}
	return p.Egress, es, nil
}

// allowedByPolicy says why the policy refuses t, or "" when it allows it.
// The address rule is separate (Guard).
func (d *decider) allowedByPolicy(ctx context.Context, t target) string {
	mode, es, err := d.policyEntries(ctx)
	if err != nil {
		return reasonPolicyError
	}
	switch mode {
	case Public:
		return ""
	case Allowlist:
	default:
		return reasonPolicyNone
	}
	for _, e := range es {
		if t.name != "" && e.matchName(t.name, t.port) || t.addr.IsValid() && e.matchAddr(t.addr, t.port) {
			return ""
		}
	}
	if t.addr.IsValid() {
		for _, n := range d.memory.names(t.addr, time.Now()) {
			for _, e := range es {
				if e.matchName(n, t.port) {
					return ""
				}
			}
		}
	}
	return reasonNotAllowed
}

// decide returns the addresses the sandbox may be connected to for t, in
// the order to try them, or a *Refusal, or the error that kept a name
// from resolving. A name's addresses are checked one by one and only
// those that pass are returned; the caller dials exactly these.
func (d *decider) decide(ctx context.Context, t target) ([]netip.AddrPort, error) {
	if reason := d.allowedByPolicy(ctx, t); reason != "" {
		return nil, t.refuse(reason)
	}
	if t.addr.IsValid() {
		ap := netip.AddrPortFrom(t.addr, t.port)
		if err := d.guard.Check(ap); err != nil {
			return nil, err
		}
		return []netip.AddrPort{ap}, nil
	}
	ips, err := d.lookup(ctx, "ip", t.name)
	if err != nil {
		return nil, err
	}
	out, refusal := d.filter(t, ips)
	if len(out) == 0 {
		return nil, refusal
	}
	return out, nil
}

// filter keeps the addresses that pass the Guard; when none does, the
// refusal names the first and its reason.
func (d *decider) filter(t target, ips []netip.Addr) ([]netip.AddrPort, *Refusal) {
	var out []netip.AddrPort
	var first *Refusal
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip.Unmap().WithZone(""), t.port)
		if err := d.guard.Check(ap); err != nil {
			var r *Refusal
			if first == nil && errors.As(err, &r) {
				first = r
				first.Name = t.name
			}
			continue
		}
		out = append(out, ap)
	}
	if len(out) == 0 && first == nil {
		first = t.refuse(reasonNoAddress)
	}
	return out, first
}

// lookup resolves name with berth's resolver, bounded in time.
func (d *decider) lookup(ctx context.Context, network, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := d.resolver.LookupNetIP(ctx, network, name)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", name, err)
	}
	return ips, nil
}
