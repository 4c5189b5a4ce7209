package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Mode is how much of the network a sandbox may reach.
type Mode string

// Modes, from narrowest to widest.
const (
	None      Mode = "none"
	Allowlist Mode = "allowlist"
	Public    Mode = "public"
)

// rank orders modes for ceilings; an unknown mode ranks below none.
func (m Mode) rank() int {
	switch m {
	case None:
		return 0
	case Allowlist:
		return 1
	case Public:
		return 2
	}
	return -1
}

// MaxAllow is the most entries an allowlist may have.
const MaxAllow = 64

// Policy is one sandbox's egress policy, as start_server and
// set_server_network take it (JSON).
type Policy struct {
	Egress Mode `json:"egress"`
	// Allow lists what an allowlist policy reaches: "pypi.org",
	// "*.github.com", "203.0.113.7", "203.0.113.0/24", "2001:db8::/32",
	// each optionally with a port: "pypi.org:443", "[2001:db8::1]:443".
	Allow []string `json:"allow,omitempty"`
}

// Validate says what is wrong with p, naming the bad entry.
func (p Policy) Validate() error {
	_, err := p.entries()
	return err
}

// Normalize returns p with its entries in canonical form (names lower
// case, no trailing dot, prefixes masked), or Validate's error.
func (p Policy) Normalize() (Policy, error) {
	es, err := p.entries()
	if err != nil {
		return Policy{}, err
	}
	out := Policy{Egress: p.Egress}
	for _, e := range es {
		out.Allow = append(out.Allow, e.String())
	}
	return out, nil
}

// Equal says whether p and q are the same policy, entry for entry.
func (p Policy) Equal(q Policy) bool {
	return p.Egress == q.Egress && slices.Equal(p.Allow, q.Allow)
}

// String reads like "allowlist: pypi.org, *.github.com:443".
func (p Policy) String() string {
	if p.Egress == Allowlist {
		return string(p.Egress) + ": " + strings.Join(p.Allow, ", ")
	}
	if p.Egress == "" {
		return "(no egress mode)"
	}
	return string(p.Egress)
}

// entries parses and checks p.
func (p Policy) entries() ([]entry, error) {
	switch p.Egress {
	case None, Public:
		if len(p.Allow) > 0 {
			return nil, fmt.Errorf("network: allow entries are only for egress %q, not %q", Allowlist, p.Egress)
		}
		return nil, nil
	case Allowlist:
	default:
		return nil, fmt.Errorf("network: egress %q is not one of %q, %q, %q", p.Egress, None, Allowlist, Public)
	}
	if len(p.Allow) == 0 {
		return nil, fmt.Errorf("network: egress %q needs at least one allow entry (or use egress %q)", Allowlist, None)
	}
	if len(p.Allow) > MaxAllow {
		return nil, fmt.Errorf("network: %d allow entries, at most %d", len(p.Allow), MaxAllow)
	}
	es := make([]entry, 0, len(p.Allow))
	for _, s := range p.Allow {
		e, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("network: allow entry %q: %w", clip(s), err)
		}
		es = append(es, e)
	}
	return es, nil
}

// entry is one parsed allow entry: a name (exact or "*." wildcard) or a
// prefix, and a port (0: any).
type entry struct {
	name     string // without "*.": "github.com" for "*.github.com"
	wildcard bool
	prefix   netip.Prefix // valid when the entry is an address or CIDR
	port     uint16
}

func (e entry) String() string {
	var host string
	switch {
	case e.prefix.IsValid():
		if e.prefix.IsSingleIP() {
			host = e.prefix.Addr().String()
		} else {
			host = e.prefix.String()
		}
		if e.port != 0 && e.prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	case e.wildcard:
		host = "*." + e.name
	default:
		host = e.name
	}
	if e.port != 0 {
		return host + ":" + strconv.Itoa(int(e.port))
	}
	return host
}

// matchName reports whether e admits a connection to name (normalized)
// on port (0: the port does not matter, as for a DNS question).
func (e entry) matchName(name string, port uint16) bool {
	if e.prefix.IsValid() || !e.portOK(port) {
		return false
	}
	if e.wildcard {
		return strings.HasSuffix(name, "."+e.name)
	}
	return name == e.name
}

// matchAddr reports whether e admits a connection to ip on port.
func (e entry) matchAddr(ip netip.Addr, port uint16) bool {
	return e.prefix.IsValid() && e.portOK(port) && e.prefix.Contains(ip.Unmap())
}

func (e entry) portOK(port uint16) bool { return e.port == 0 || port == 0 || e.port == port }

// parseEntry reads "host", "host:port", "[v6]", "[v6]:port", "v6", each
// host being a name, "*.name", an address or a CIDR prefix.
func parseEntry(s string) (entry, error) {
	if s == "" {
		return entry{}, fmt.Errorf("empty")
	}
	if len(s) > maxNameLen+16 {
		return entry{}, fmt.Errorf("longer than %d characters", maxNameLen+16)
	}
	host, portStr := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return entry{}, fmt.Errorf("missing ]")
		}
		host, portStr = s[1:end], s[end+1:]
		if portStr != "" {
			if portStr[0] != ':' {
				return entry{}, fmt.Errorf("unexpected %q after ]", portStr)
			}
			portStr = portStr[1:]
			if portStr == "" {
				return entry{}, fmt.Errorf("empty port")
			}
		}
		if !strings.Contains(host, ":") {
			return entry{}, fmt.Errorf("brackets are only for IPv6 addresses")
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, portStr = s[:i], s[i+1:]
		if portStr == "" {
			return entry{}, fmt.Errorf("empty port")
		}
	}
	var e entry
	if portStr != "" {
		n, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || n == 0 {
			return entry{}, fmt.Errorf("port %q is not a number from 1 to 65535", portStr)
		}
		e.port = uint16(n)
	}
	if host == "" {
		return entry{}, fmt.Errorf("no host")
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return entry{}, fmt.Errorf("%q is not a CIDR prefix such as 203.0.113.0/24 or 2001:db8::/32", host)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			if p.Bits() < 0 {
				return entry{}, fmt.Errorf("%q is not a CIDR prefix such as 203.0.113.0/24 or 2001:db8::/32", host)
			}
		}
		e.prefix = p.Masked()
		return e, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return entry{}, fmt.Errorf("an address with a zone (%%) cannot be reached from a sandbox")
		}
		ip = ip.Unmap()
		e.prefix = netip.PrefixFrom(ip, ip.BitLen())
		return e, nil
	}
	if strings.Contains(host, ":") {
		return entry{}, fmt.Errorf("%q is not an IPv6 address (a port goes after [address])", host)
	}
	name := host
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.wildcard = true
		name = rest
	}
	name, err := normalizeName(name)
	if err != nil {
		return entry{}, err
	}
	if strings.Contains(name, "*") {
		return entry{}, fmt.Errorf(`"*." may only be the first label`)
	}
	e.name = name
	return e, nil
}

// maxNameLen is the longest DNS name.
const maxNameLen = 253

// normalizeName lower-cases a DNS name and drops one trailing dot, or
// says why it is not a name. "*" is let through for parseEntry to judge.
func normalizeName(name string) (string, error) {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", fmt.Errorf("empty name")
	}
	if len(name) > maxNameLen {
		return "", fmt.Errorf("name longer than %d characters", maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			return "", fmt.Errorf("non-ASCII name: write internationalized names in their xn-- (punycode) form")
		}
	}
	name = strings.ToLower(name)
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "", fmt.Errorf("empty label in %q", name)
		}
		if len(label) > 63 {
			return "", fmt.Errorf("label longer than 63 characters in %q", name)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '*') {
				return "", fmt.Errorf("character %q is not allowed in a name", c)
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("label %q starts or ends with a hyphen", label)
		}
	}
	return name, nil
}

// clip shortens what a caller sent before it goes into an error message
// (which quotes it with %q).
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// printable is clip for what a sandbox sent that goes unquoted into a
// refusal (its events, logs and answers): one line of printable ASCII.
func printable(s string) string {
	b := []byte(clip(s))
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}
