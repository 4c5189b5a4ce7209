package netguard

import "net/netip"

// reserved are ranges that the netip predicates do not cover but that
// never hold a public host: documentation and benchmarking ranges, the
// old class E space, and IPv6 prefixes that embed or translate an IPv4
// address (NAT64, 6to4, Teredo, IPv4-compatible), through which a private
// IPv4 address could be reached.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:10::/28"),
	netip.MustParsePrefix("2001:20::/28"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
}

// Named ranges, checked before the generic predicates so that the reason
// says what the address is rather than only what it is not.
var (
	cloudMetadata = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack...
		netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	}
	carrierNAT   = netip.MustParsePrefix("100.64.0.0/10")
	uniqueLocal  = netip.MustParsePrefix("fc00::/7")
	broadcast    = netip.MustParseAddr("255.255.255.255")
	siteLocalOld = netip.MustParsePrefix("fec0::/10")
)

// Check says whether ip is a public unicast address. When it is not,
// reason names why in a few stable words ("loopback", "private range",
// "cloud metadata", "reserved range 192.0.2.0/24", ...), fit for an error
// message and a metric label. An IPv4-mapped IPv6 address is judged as
// the IPv4 address it carries; a zone is ignored.
func Check(ip netip.Addr) (reason string, ok bool) {
	if !ip.IsValid() {
		return "invalid address", false
	}
	ip = ip.Unmap().WithZone("")
	for _, m := range cloudMetadata {
		if ip == m {
			return "cloud metadata", false
		}
	}
	switch {
	case ip.IsUnspecified():
		return "unspecified", false
	case ip.IsLoopback():
		return "loopback", false
	case ip == broadcast:
		return "broadcast", false
	case ip.IsMulticast():
		return "multicast", false
	case ip.IsLinkLocalUnicast():
		return "link-local", false
	case carrierNAT.Contains(ip):
		return "carrier-grade NAT", false
	case uniqueLocal.Contains(ip):
		return "unique local", false
	case siteLocalOld.Contains(ip):
		return "site-local", false
	case ip.IsPrivate():
		return "private range", false
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return "reserved range " + p.String(), false
		}
	}
	if !ip.IsGlobalUnicast() {
		return "not global unicast", false
	}
	return "", true
}
