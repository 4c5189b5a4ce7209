package egresstest

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// zoneTTL is short: a test that changes a name sees the change at once
// in any resolver that caches.
const zoneTTL = 5

// maxNames bounds the names a test may add to a zone.
const maxNames = 4096

// zone is the DNS data of .test: names to addresses, and a wildcard.
type zone struct {
	mu    sync.RWMutex
	names map[string][]netip.Addr // lower-case, with the final dot
	// wildSuffix names, under which every name (".x.wild.test.") has
	// wildAddrs.
	wildSuffix string
	wildAddrs  []netip.Addr
}

var (
	zoneApex = dnsmessage.MustNewName("test.")
	zoneNS   = dnsmessage.MustNewName("ns.test.")
	zoneSOA  = dnsmessage.SOAResource{
		NS: zoneNS, MBox: dnsmessage.MustNewName("hostmaster.test."),
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, MinTTL: zoneTTL,
	}
)

func newZone() *zone { return &zone{names: map[string][]netip.Addr{}} }

// canonical returns name in lower case with a final dot, and whether it
// is in .test.
func canonical(name string) (string, bool) {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name, name == "test." || strings.HasSuffix(name, ".test.")
}

// set makes name resolve to addrs (none: the name exists with no
// address).
func (z *zone) set(name string, addrs ...netip.Addr) error {
	name, ok := canonical(name)
	if !ok {
		return fmt.Errorf("%q is not in .test", name)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.names[name]; !ok && len(z.names) >= maxNames {
		return fmt.Errorf("the zone has %d names already", maxNames)
	}
	z.names[name] = append([]netip.Addr(nil), addrs...)
	return nil
}

// setWild makes every name under suffix resolve to addrs.
func (z *zone) setWild(suffix string, addrs ...netip.Addr) {
	suffix, _ = canonical(suffix)
	z.mu.Lock()
	defer z.mu.Unlock()
	z.wildSuffix, z.wildAddrs = "."+suffix, append([]netip.Addr(nil), addrs...)
}

// lookup returns the addresses of name (canonical), and whether the name
// exists at all.
func (z *zone) lookup(name string) ([]netip.Addr, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	if addrs, ok := z.names[name]; ok {
		return addrs, true
	}
	if z.wildSuffix != "" && strings.HasSuffix(name, z.wildSuffix) {
		return z.wildAddrs, true
	}
	return nil, name == "test."
}

// answer returns the reply to the DNS query msg, at most limit bytes long
// (512 over UDP, 65535 over TCP), or nil when msg is not worth a reply
// (not a query, or too broken to say who asked).
func (z *zone) answer(msg []byte, limit int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	q, err := p.Question()
	if err != nil {
		rh.RCode = dnsmessage.RCodeFormatError
		return build(limit, rh, nil, nil, nil)
	}
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return build(limit, rh, &q, nil, nil)
	}
	name, inZone := canonical(q.Name.String())
	if !inZone || (q.Class != dnsmessage.ClassINET && q.Class != dnsmessage.ClassANY) {
		// Not ours, and no recursion: the answer a server gives for a
		// zone it does not serve.
		rh.RCode = dnsmessage.RCodeRefused
		return build(limit, rh, &q, nil, nil)
	}
	rh.Authoritative = true
	addrs, exists := z.lookup(name)
	if !exists {
		rh.RCode = dnsmessage.RCodeNameError
		return build(limit, rh, &q, nil, soaAuthority())
	}
	rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: zoneTTL}
	var answers []dnsmessage.Resource
	for _, a := range addrs {
		switch {
		case a.Is4() && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL):
			answers = append(answers, dnsmessage.Resource{Header: rrh, Body: &dnsmessage.AResource{A: a.As4()}})
		case a.Is6() && (q.Type == dnsmessage.TypeAAAA || q.Type == dnsmessage.TypeALL):
			answers = append(answers, dnsmessage.Resource{Header: rrh, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	if name == "test." {
		switch q.Type {
		case dnsmessage.TypeSOA:
			answers = soaAuthority()
		case dnsmessage.TypeNS:
			answers = []dnsmessage.Resource{{Header: rrh, Body: &dnsmessage.NSResource{NS: zoneNS}}}
		}
	}
	if len(answers) == 0 {
		return build(limit, rh, &q, nil, soaAuthority())
	}
	return build(limit, rh, &q, answers, nil)
}

func soaAuthority() []dnsmessage.Resource {
	h := dnsmessage.ResourceHeader{Name: zoneApex, Class: dnsmessage.ClassINET, TTL: zoneTTL}
	soa := zoneSOA
	return []dnsmessage.Resource{{Header: h, Body: &soa}}
}

// build packs a reply; one longer than limit goes without its records, marked
// truncated, so that the client asks again over TCP.
func build(limit int, h dnsmessage.Header, q *dnsmessage.Question, answers, authority []dnsmessage.Resource) []byte {
	m := dnsmessage.Message{Header: h, Answers: answers, Authorities: authority}
	if q != nil {
		m.Questions = []dnsmessage.Question{*q}
	}
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	if len(out) > limit {
		m.Header.Truncated = true
		m.Answers, m.Authorities = nil, nil
		out, _ = m.Pack()
	}
	return out
}
