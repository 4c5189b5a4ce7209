package egress

import (
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
)

func TestGuardCheck(t *testing.T) {
	var reads atomic.Int32
	g := &Guard{
		Reachable: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("224.0.0.0/4")},
		Never: []netip.AddrPort{
			netip.MustParseAddrPort("203.0.113.5:0"),
			netip.MustParseAddrPort("127.0.0.1:5432"),
			netip.MustParseAddrPort("0.0.0.0:8443"),
		},
		interfaceAddrs: func() ([]net.Addr, error) {
			reads.Add(1)
			return []net.Addr{
				&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
				&net.IPNet{IP: net.ParseIP("198.51.100.10"), Mask: net.CIDRMask(24, 32)},
				&net.IPNet{IP: net.ParseIP("93.184.215.99"), Mask: net.CIDRMask(24, 32)},
			}, nil
		},
	}
	for _, tc := range []struct {
		addr   string
		reason string
	}{
		{"93.184.215.14:443", ""},
		{"[2606:4700::1111]:443", ""},
		{"203.0.113.7:80", ""},              // Reachable lifts the reserved range
		{"127.0.0.1:8080", ""},              // and loopback
		{"[::ffff:127.0.0.1]:8080", ""},     // mapped addresses are judged unmapped
		{"203.0.113.5:443", "berth itself"}, // Never beats Reachable, any port
		{"127.0.0.1:5432", "berth itself"},
		{"127.0.0.2:8443", "berth itself"},     // 0.0.0.0:8443 covers loopback
		{"93.184.215.99:8443", "berth itself"}, // and the host's addresses
		{"93.184.215.99:443", "host address"},  // a public address of the host
		{"198.51.100.10:443", "host address"},
		{"0.0.0.0:80", "unspecified"},
		{"[::]:80", "unspecified"},
		{"224.0.0.1:80", "multicast"}, // always, even inside Reachable
		{"255.255.255.255:80", "broadcast"},
		{"10.0.0.5:5432", "private range"},
		{"[::1]:80", "loopback"},
		{"169.254.169.254:80", "cloud metadata"},
		{"[fd00:ec2::254]:80", "cloud metadata"},
		{"100.64.1.1:80", "carrier-grade NAT"},
		{"192.0.2.1:80", "reserved range 192.0.2.0/24"},
	} {
		err := g.Check(netip.MustParseAddrPort(tc.addr))
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%s refused: %v", tc.addr, err)
			}
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Reason != tc.reason {
			t.Errorf("%s: %v, want refusal %q", tc.addr, err, tc.reason)
		}
	}
	// The interface list is cached, not read for every connection.
	if n := reads.Load(); n < 1 || n > 2 {
		t.Errorf("host addresses read %d times for %d checks", n, 21)
	}
}

func TestRefusalError(t *testing.T) {
	for _, tc := range []struct {
		r    Refusal
		want string
	}{
		{Refusal{Name: "db.example.com", Addr: netip.MustParseAddrPort("10.0.0.5:5432"), Port: 5432, Reason: "private range"},
			"egress refused: 10.0.0.5:5432 (db.example.com), private range"},
		{Refusal{Addr: netip.MustParseAddrPort("10.0.0.5:5432"), Port: 5432, Reason: "private range"},
			"egress refused: 10.0.0.5:5432, private range"},
		{Refusal{Name: "evil.com", Port: 443, Reason: "not in allowlist"}, "egress refused: evil.com:443, not in allowlist"},
		{Refusal{Name: "evil.com", Reason: "policy none"}, "egress refused: evil.com, policy none"},
	} {
		if got := tc.r.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
