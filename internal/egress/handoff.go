package egress

import (
	"bufio"
	"net"
	"time"
)

// What a started Gateway is handed. Each call returns at once; the work
// runs on the gateway's own goroutines, which its context's end stops.
// The bounds are per gateway, so one sandbox asking too much cannot take
// another's share of a listener they both use.

// ServeConn serves one connection to the proxy port, HTTP or SOCKS5 (a
// SOCKS5 client's first byte is its version, 5). The gateway owns c from
// then on: it closes c at once when the gateway is not running, or
// already has maxClientConns of the sandbox's connections open.
func (g *Gateway) ServeConn(c net.Conn) {
	g.hand(c, g.clients, g.serveProxyConn)
}

// ServeDNSConn serves one DNS over TCP connection, as ServeConn does a
// proxy connection (at most dnsTCPConns at once).
func (g *Gateway) ServeDNSConn(c net.Conn) {
	g.hand(c, g.dnsConns, g.serveDNSConn)
}

// AnswerDNS answers one DNS over UDP message and gives the answer to
// reply, unless the message deserves none. msg is copied. A message
// that is too long, or that comes while dnsInFlight others are being
// answered or the gateway is not running, is dropped (the sandbox's
// resolver asks again); AnswerDNS then returns false.
func (g *Gateway) AnswerDNS(msg []byte, reply func([]byte)) bool {
	if !g.running.Load() || len(msg) > dnsMaxQuery {
		return false
	}
	select {
	case g.dnsQuestions <- struct{}{}:
	default:
		return false
	}
	q := append([]byte(nil), msg...)
	ok := g.track.goRun(func() {
		defer func() { <-g.dnsQuestions }()
		if resp := g.dnsAnswer(g.ctx, q, true); resp != nil {
			reply(resp)
		}
	})
	if !ok {
		<-g.dnsQuestions
	}
	return ok
}

// hand serves c with serve on a tracked goroutine while it holds one of
// slots, or closes it.
func (g *Gateway) hand(c net.Conn, slots chan struct{}, serve func(net.Conn)) {
	if !g.running.Load() {
		c.Close()
		return
	}
	select {
	case slots <- struct{}{}:
	default:
		c.Close()
		return
	}
	tc := g.track.add(c, true, func() { <-slots })
	if tc == nil {
		return
	}
	if !g.track.goRun(func() { serve(tc) }) {
		tc.Close()
	}
}

// serveProxyConn sniffs the first byte of a proxy connection: SOCKS5
// begins with its version byte 5, anything else is taken for HTTP and
// given to the gateway's HTTP server.
func (g *Gateway) serveProxyConn(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	r := bufio.NewReaderSize(c, 16)
	first, err := r.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	if first[0] == 5 {
		g.socks(g.ctx, c, r)
		return
	}
	c.SetReadDeadline(time.Time{})
	g.httpL.hand(&peekedConn{Conn: c, r: r})
}

// proxyAddr is the address of the gateway's HTTP server's listener,
// which is no socket: connections are handed to it.
type proxyAddr struct{}

func (proxyAddr) Network() string { return "tcp" }
func (proxyAddr) String() string  { return "berth-egress-proxy" }
