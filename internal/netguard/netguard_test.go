package netguard

import (
	"net/netip"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		reason string // "" = public
	}{
		{"93.184.215.14", ""},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"::ffff:8.8.8.8", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private range"},
		{"172.16.0.1", "private range"},
		{"172.31.255.254", "private range"},
		{"192.168.1.1", "private range"},
		{"::ffff:10.0.0.1", "private range"},
		{"169.254.169.254", "cloud metadata"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.254", "carrier-grade NAT"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fec0::1", "site-local"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "reserved range 0.0.0.0/8"},
		{"192.0.0.8", "reserved range 192.0.0.0/24"},
		{"192.0.2.1", "reserved range 192.0.2.0/24"},
		{"198.18.0.1", "reserved range 198.18.0.0/15"},
		{"198.19.255.1", "reserved range 198.18.0.0/15"},
		{"198.51.100.7", "reserved range 198.51.100.0/24"},
		{"203.0.113.7", "reserved range 203.0.113.0/24"},
		{"240.0.0.1", "reserved range 240.0.0.0/4"},
		{"64:ff9b::a00:1", "reserved range 64:ff9b::/96"},
		{"64:ff9b:1::1", "reserved range 64:ff9b:1::/48"},
		{"2002:a00:1::1", "reserved range 2002::/16"},
		{"2001:0:4136:e378::1", "reserved range 2001::/32"},
		{"2001:db8::1", "reserved range 2001:db8::/32"},
		{"::a00:1", "reserved range ::/96"},
		{"100::1", "reserved range 100::/64"},
	} {
		reason, ok := Check(netip.MustParseAddr(tc.addr))
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("Check(%s) = %q, %v; want %q", tc.addr, reason, ok, tc.reason)
		}
	}
	if reason, ok := Check(netip.Addr{}); ok || reason == "" {
		t.Errorf("Check(zero address) = %q, %v; want a refusal", reason, ok)
	}
}
