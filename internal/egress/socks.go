package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// socksHandshakeTimeout bounds a SOCKS5 greeting and request.
const socksHandshakeTimeout = 30 * time.Second

// SOCKS5 reply codes (RFC 1928).
const (
	socksSucceeded        = 0x00
	socksGeneralFailure   = 0x01
	socksNotAllowed       = 0x02
	socksNetUnreachable   = 0x03
	socksHostUnreachable  = 0x04
	socksConnRefused      = 0x05
	socksTTLExpired       = 0x06
	socksCmdNotSupported  = 0x07
	socksAddrNotSupported = 0x08
)

// socks serves one SOCKS5 connection: no authentication, CONNECT only,
// IPv4, IPv6 and domain addresses (socks5h: the gateway resolves).
// c reads through r, which holds the sniffed first byte.
func (g *Gateway) socks(ctx context.Context, c net.Conn, r *bufio.Reader) {
	client := &peekedConn{Conn: c, r: r}
	c.SetDeadline(time.Now().Add(socksHandshakeTimeout))
	t, ok := g.socksRequest(client)
	if !ok {
		c.Close()
		return
	}
	up, err := g.dialTarget(ctx, t)
	if err != nil {
		socksReply(c, socksCode(err))
		c.Close()
		return
	}
	// The bound address is berth's own; a sandbox has no use for it.
	if socksReply(c, socksSucceeded) != nil {
		c.Close()
		up.Close()
		return
	}
	c.SetDeadline(time.Time{})
	tunnel(client, up, tunnelIdle)
}

// socksRequest reads the greeting and the request, answering the
// greeting and any request it refuses. Lengths come from the sandbox:
// each read is of a fixed size or at most 255 bytes.
func (g *Gateway) socksRequest(c net.Conn) (target, bool) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != 5 || hdr[1] == 0 {
		return target{}, false
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return target{}, false
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		c.Write([]byte{5, 0xff})
		return target{}, false
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return target{}, false
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != 5 {
		return target{}, false
	}
	var host string
	switch req[3] {
	case 1, 4:
		b := make([]byte, 4)
		if req[3] == 4 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return target{}, false
		}
		ip, _ := netip.AddrFromSlice(b)
		host = ip.String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return target{}, false
		}
		b := make([]byte, n[0])
		if _, err := io.ReadFull(c, b); err != nil {
			return target{}, false
		}
		host = string(b)
	default:
		socksReply(c, socksAddrNotSupported)
		return target{}, false
	}
	var pb [2]byte
	if _, err := io.ReadFull(c, pb[:]); err != nil {
		return target{}, false
	}
	port := uint16(pb[0])<<8 | uint16(pb[1])
	if req[1] != 1 {
		// BIND and UDP ASSOCIATE would open the sandbox to inbound or
		// unproxied traffic.
		socksReply(c, socksCmdNotSupported)
		return target{}, false
	}
	t, err := parseTarget(host, port)
	if err == nil && port == 0 {
		err = t.refuse(reasonInvalidPort)
	}
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			g.refuse(ref)
		}
		socksReply(c, socksNotAllowed)
		return target{}, false
	}
	return t, true
}

// socksReply answers a request with code and the unspecified address.
func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
	return err
}

// socksCode maps why a connection was not made to a reply code.
func socksCode(err error) byte {
	var ref *Refusal
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &ref):
		return socksNotAllowed
	case errors.As(err, &dnsErr):
		return socksHostUnreachable
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		return socksHostUnreachable
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return socksTTLExpired
	}
	return socksGeneralFailure
}
