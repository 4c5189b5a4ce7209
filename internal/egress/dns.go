package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS bounds.
const (
	dnsTTL          = 30   // seconds, in every answer
	dnsMaxQuery     = 4096 // bytes of a query, UDP or TCP
	dnsUDPSize      = 512  // an answer without EDNS
	dnsMaxUDPSize   = 1232 // the most an EDNS client may ask for (no fragmentation)
	dnsInFlight     = 64   // UDP questions answered at once; more are dropped (clients retry)
	dnsTCPConns     = 32   // TCP connections at once; more are closed
	dnsTCPIdle      = 10 * time.Second
	dnsQueryTimeout = resolveTimeout + time.Second
)

// serveDNSUDP answers questions on pc until it is closed.
func (g *Gateway) serveDNSUDP(ctx context.Context, pc net.PacketConn) error {
	buf := make([]byte, dnsMaxQuery)
	backoff := newBackoff()
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return err
			}
			if !backoff.wait(ctx) {
				return ctx.Err()
			}
			continue
		}
		backoff.reset()
		g.AnswerDNS(buf[:n], func(resp []byte) { pc.WriteTo(resp, from) })
	}
}

// serveDNSConn answers length-prefixed questions on c until it is idle
// for dnsTCPIdle, sends something that is not a question, or closes.
func (g *Gateway) serveDNSConn(c net.Conn) {
	defer c.Close()
	var lenb [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, lenb[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint16(lenb[:])
		if n > dnsMaxQuery {
			return
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := g.dnsAnswer(g.ctx, q, false)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		c.SetWriteDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// dnsAnswer answers one query message, or returns nil for a message not
// worth an answer (too short to carry an ID, or itself a response).
func (g *Gateway) dnsAnswer(ctx context.Context, msg []byte, udp bool) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return buildDNS(rh, nil, nil, dnsUDPSize)
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		rh.RCode = dnsmessage.RCodeFormatError
		return buildDNS(rh, nil, nil, dnsUDPSize)
	}
	q := qs[0]
	size := dnsUDPSize
	if udp {
		size = ednsSize(&p)
	} else {
		size = 65535
	}
	ctx, cancel := context.WithTimeout(ctx, dnsQueryTimeout)
	defer cancel()
	rcode, addrs := g.resolveQuestion(ctx, q)
	rh.RCode = rcode
	return buildDNS(rh, &q, addrs, size)
}

// ednsSize is the answer size the client accepts: its EDNS0 UDP size,
// within bounds, or 512.
func ednsSize(p *dnsmessage.Parser) int {
	if p.SkipAllAnswers() != nil || p.SkipAllAuthorities() != nil {
		return dnsUDPSize
	}
	for {
		h, err := p.AdditionalHeader()
		if err != nil {
			return dnsUDPSize
		}
		if h.Type == dnsmessage.TypeOPT {
			return min(max(int(h.Class), dnsUDPSize), dnsMaxUDPSize)
		}
		if p.SkipAdditional() != nil {
			return dnsUDPSize
		}
	}
}

// resolveQuestion decides a question: A and AAAA for a name the policy
// allows are resolved by berth and answered with the addresses the Guard
// lets through, each remembered; a refused name is NXDOMAIN; anything
// else gets an empty answer.
func (g *Gateway) resolveQuestion(ctx context.Context, q dnsmessage.Question) (dnsmessage.RCode, []netip.Addr) {
	if q.Class != dnsmessage.ClassINET || q.Type != dnsmessage.TypeA && q.Type != dnsmessage.TypeAAAA {
		return dnsmessage.RCodeSuccess, nil
	}
	name := strings.TrimSuffix(q.Name.String(), ".")
	if name == "" {
		return dnsmessage.RCodeSuccess, nil
	}
	t, err := parseTarget(name, 0)
	if err != nil || t.addr.IsValid() {
		var ref *Refusal
		if errors.As(err, &ref) {
			g.refuse(ref)
		}
		return dnsmessage.RCodeNameError, nil
	}
	// The sandbox's own loopback is its own: nothing to decide.
	if t.name == "localhost" || strings.HasSuffix(t.name, ".localhost") {
		if q.Type == dnsmessage.TypeA {
			return dnsmessage.RCodeSuccess, []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}
		return dnsmessage.RCodeSuccess, []netip.Addr{netip.IPv6Loopback()}
	}
	if reason := g.dec.allowedByPolicy(ctx, t); reason != "" {
		g.refuse(t.refuse(reason))
		return dnsmessage.RCodeNameError, nil
	}
	network := "ip4"
	if q.Type == dnsmessage.TypeAAAA {
		network = "ip6"
	}
	ips, err := g.dec.lookup(ctx, network, t.name)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			// NODATA rather than NXDOMAIN: a name with only A records
			// must not look missing to the AAAA question (musl gives up
			// on the name for either NXDOMAIN).
			return dnsmessage.RCodeSuccess, nil
		}
		g.log.Debug("egress DNS lookup failed", "name", t.name, "err", err)
		return dnsmessage.RCodeServerFailure, nil
	}
	allowed, ref := g.dec.filter(t, ips)
	if len(allowed) == 0 {
		if len(ips) == 0 {
			return dnsmessage.RCodeSuccess, nil
		}
		g.refuse(ref)
		return dnsmessage.RCodeNameError, nil
	}
	now := time.Now()
	out := make([]netip.Addr, 0, len(allowed))
	for _, a := range allowed {
		g.dec.memory.remember(t.name, a.Addr(), now)
		out = append(out, a.Addr())
	}
	return dnsmessage.RCodeSuccess, out
}

// buildDNS writes an answer; when it would not fit size, the answer goes
// without its records and marked truncated, so the client asks over TCP.
func buildDNS(rh dnsmessage.Header, q *dnsmessage.Question, addrs []netip.Addr, size int) []byte {
	build := func(addrs []netip.Addr, truncated bool) []byte {
		rh.Truncated = truncated
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
		b.EnableCompression()
		if q != nil {
			if b.StartQuestions() != nil || b.Question(*q) != nil {
				return nil
			}
		}
		if b.StartAnswers() != nil {
			return nil
		}
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			var err error
			if a.Is4() {
				err = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			} else {
				err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
			if err != nil {
				return nil
			}
		}
		out, err := b.Finish()
		if err != nil {
			return nil
		}
		return out
	}
	out := build(addrs, false)
	if len(out) > size {
		out = build(nil, true)
	}
	return out
}
