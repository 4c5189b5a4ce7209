package egresstest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// nsLinkName is the namespace's end of the host link.
const nsLinkName = "host"

// buildNetwork makes namespace ns for plan p: the veth pair to the host,
// the hosts' addresses on the namespace's loopback, and the host's routes
// to just the slot's ranges.
func buildNetwork(ctx context.Context, p Plan, ns string) error {
	hl := hostLinkName(p.Slot)
	if err := ipCmd(ctx, "netns", "add", ns); err != nil {
		return err
	}
	if err := ipCmd(ctx, "link", "add", hl, "type", "veth", "peer", "name", nsLinkName, "netns", ns); err != nil {
		return err
	}
	// IPv6 addresses are added without duplicate address detection: the
	// link has two ends, both ours, and a tentative address would refuse
	// connections for the first second or two.
	if err := ipBatch(ctx, "", []string{
		fmt.Sprintf("addr add %s/30 dev %s", p.HostLink, hl),
		fmt.Sprintf("addr add %s/64 dev %s nodad", p.HostLink6, hl),
		fmt.Sprintf("link set %s up", hl),
	}); err != nil {
		return err
	}
	lines := []string{
		"link set lo up",
		fmt.Sprintf("addr add %s/30 dev %s", p.NSLink, nsLinkName),
		fmt.Sprintf("addr add %s/64 dev %s nodad", p.NSLink6, nsLinkName),
		fmt.Sprintf("link set %s up", nsLinkName),
	}
	for _, h := range hostOffsets {
		v4, v6 := p.host(h.off)
		lines = append(lines,
			fmt.Sprintf("addr add %s/32 dev lo", v4),
			fmt.Sprintf("addr add %s/128 dev lo nodad", v6))
	}
	if err := ipBatch(ctx, ns, lines); err != nil {
		return err
	}
	return ipBatch(ctx, "", []string{
		fmt.Sprintf("route add %s via %s dev %s", p.Prefix, p.NSLink, hl),
		fmt.Sprintf("route add %s via %s dev %s", p.Prefix6, p.NSLink6, hl),
	})
}

// linger is how long removing a namespace may take before teardown says
// something still holds it and cuts the link by hand.
const linger = 20 * time.Second

// removeNetwork removes namespace ns. The kernel destroys a namespace (and
// with it the veth pair and the host's routes through it) only once
// nothing refers to it any more, sockets included; so the host's end of
// the link vanishing is the proof that it is really gone. If it does not
// within linger, the link is deleted by hand and lingered says so.
func removeNetwork(ctx context.Context, p Plan, ns string) (lingered bool, err error) {
	hl := hostLinkName(p.Slot)
	var errs []error
	if err := ipCmd(ctx, "netns", "del", ns); err != nil {
		errs = append(errs, err)
	}
	deadline := time.NewTimer(linger)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for linkExists(hl) {
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		lingered = true
		if err := ipCmd(context.WithoutCancel(ctx), "link", "del", hl); err != nil && linkExists(hl) {
			errs = append(errs, err)
		}
		break
	}
	return lingered, errors.Join(errs...)
}
