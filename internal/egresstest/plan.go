package egresstest

import (
	"fmt"
	"net/netip"
)

// Slots is how many Internets can exist at once on one machine.
const Slots = 8

// The names of the hosts, each with the last part of its addresses in its
// slot's ranges.
var hostOffsets = []struct {
	name string
	off  byte
}{
	{"ns.test", 2},
	{"files.test", 3},
	{"tls.test", 4},
	{"pypi.test", 5},
	{"git.test", 6},
	{"npm.test", 7},
}

// Plan is the addresses of one slot: what the host routes to the
// namespace and what sits on either end of the link.
type Plan struct {
	Slot int
	// Prefix and Prefix6 are the ranges the hosts live in, and all the
	// host routes to the namespace.
	Prefix, Prefix6 netip.Prefix
	// HostLink and NSLink are the two ends of the veth pair (a /30 and a
	// /64 of their own; berth's gateway refuses them).
	HostLink, NSLink   netip.Addr
	HostLink6, NSLink6 netip.Addr
}

// PlanFor returns the addresses of slot n (0 to Slots-1).
func PlanFor(n int) Plan {
	if n < 0 || n >= Slots {
		panic(fmt.Sprintf("egresstest: slot %d out of range", n))
	}
	b := byte(n)
	return Plan{
		Slot:      n,
		Prefix:    netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, 32 * b}), 27),
		Prefix6:   netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x02, 0x03, 0, b}), 64),
		HostLink:  netip.AddrFrom4([4]byte{198, 18, b, 1}),
		NSLink:    netip.AddrFrom4([4]byte{198, 18, b, 2}),
		HostLink6: netip.AddrFrom16([16]byte{0xfd, 0x42, 0, b, 15: 1}),
		NSLink6:   netip.AddrFrom16([16]byte{0xfd, 0x42, 0, b, 15: 2}),
	}
}

// host returns the IPv4 and IPv6 addresses of the host with offset off.
func (p Plan) host(off byte) (netip.Addr, netip.Addr) {
	v4 := p.Prefix.Addr().As4()
	v4[3] += off
	v6 := p.Prefix6.Addr().As16()
	v6[15] = off
	return netip.AddrFrom4(v4), netip.AddrFrom16(v6)
}

// clientLink returns the addresses of client k's link (k from 1 to
// maxClients): the internet's end and the client's, in IPv4 and IPv6.
// They are inside 198.18.<slot>.0/24 and fd42:<slot>:<k>::/64, away from
// the host's link (k 0).
func (p Plan) clientLink(k int) (inet, client, inet6, client6 netip.Addr) {
	b, kb := byte(p.Slot), byte(k)
	inet = netip.AddrFrom4([4]byte{198, 18, b, 4*kb + 1})
	client = netip.AddrFrom4([4]byte{198, 18, b, 4*kb + 2})
	inet6 = netip.AddrFrom16([16]byte{0xfd, 0x42, 0, b, 0, kb, 15: 1})
	client6 = netip.AddrFrom16([16]byte{0xfd, 0x42, 0, b, 0, kb, 15: 2})
	return
}

// maxClients is how many client namespaces one Internet can link: the
// /30s of 198.18.<slot>.0/24 after the host's.
const maxClients = 63
