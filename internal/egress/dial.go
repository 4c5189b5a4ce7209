package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// dialTimeout bounds each upstream connection attempt (all of a name's
// addresses together).
const dialTimeout = 10 * time.Second

// errByteLimit ends a connection cut by Limits.Bytes.
var errByteLimit = errors.New("egress byte limit reached")

// dialTarget decides t and connects to the first of its allowed
// addresses that answers: exactly the addresses that were checked, never
// resolved again. The connection counts toward the limits until closed.
// Errors are a *Refusal (already reported) or why no address answered.
func (g *Gateway) dialTarget(ctx context.Context, t target) (net.Conn, error) {
	if g.overBytes() {
		return nil, g.refuse(t.refuse(reasonByteLimit))
	}
	addrs, err := g.dec.decide(ctx, t)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return nil, g.refuse(r)
		}
		return nil, err
	}
	if !g.takeSlot() {
		// Idle pooled connections of the HTTP forwarder hold slots that
		// nobody is using; give them back before refusing.
		g.transport.CloseIdleConnections()
		if !g.takeSlot() {
			r := t.refuse(reasonConnLimit)
			r.Addr = addrs[0]
			return nil, g.refuse(r)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var errs []error
	for _, a := range addrs {
		c, err := g.dial(ctx, "tcp", a.String())
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		tc := g.track.add(&meteredConn{Conn: c, g: g}, false, nil)
		if tc == nil {
			// Closing the metered connection gave the slot back.
			return nil, fmt.Errorf("dial %s: %w", a, net.ErrClosed)
		}
		if g.cfg.Allowed != nil {
			g.cfg.Allowed()
		}
		g.log.Debug("egress allowed", "name", t.name, "addr", a)
		return tc, nil
	}
	g.freeSlot()
	host := t.name
	if host == "" {
		host = t.addr.String()
	}
	return nil, fmt.Errorf("connect to %s: %w", net.JoinHostPort(host, strconv.Itoa(int(t.port))), errors.Join(errs...))
}

// takeSlot takes one of Limits.Connections; freeSlot gives it back.
func (g *Gateway) takeSlot() bool {
	limit := int64(g.cfg.Limits.Connections)
	for {
		n := g.upstreams.Load()
		if limit > 0 && n >= limit {
			return false
		}
		if g.upstreams.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *Gateway) freeSlot() { g.upstreams.Add(-1) }

// overBytes reports whether Limits.Bytes is used up.
func (g *Gateway) overBytes() bool {
	limit := g.cfg.Limits.Bytes
	return limit > 0 && g.used.Load() >= limit
}

// take counts up to n bytes toward Limits.Bytes and returns how many
// fit; unreserve gives back what was taken but not carried.
func (g *Gateway) take(n int) int {
	limit := g.cfg.Limits.Bytes
	if limit <= 0 {
		g.used.Add(int64(n))
		return n
	}
	for {
		u := g.used.Load()
		left := limit - u
		if left <= 0 {
			return 0
		}
		k := min(int64(n), left)
		if g.used.CompareAndSwap(u, u+k) {
			return int(k)
		}
	}
}

func (g *Gateway) unreserve(n int) {
	if n > 0 {
		g.used.Add(-int64(n))
	}
}

// cutForBytes closes every upstream connection once Limits.Bytes is
// used up, and reports it once.
func (g *Gateway) cutForBytes(addr netip.AddrPort) {
	g.cutOnce.Do(func() {
		g.refuse(&Refusal{Addr: addr, Port: addr.Port(), Reason: reasonByteLimit, Time: time.Now()})
	})
	g.track.closeConns(true)
}

// meteredConn is an upstream connection: it counts its bytes toward
// Limits.Bytes, holds them to Limits.BytesPerSecond, and gives back its
// connection slot when closed.
type meteredConn struct {
	net.Conn
	g    *Gateway
	once sync.Once
}

// Read counts what it read only once it has it: a read waiting for data
// must not hold part of the allowance. What goes past the limit is
// dropped and the connections are cut.
func (c *meteredConn) Read(p []byte) (int, error) {
	g := c.g
	if g.limiter != nil && len(p) > g.limiter.Burst() {
		p = p[:g.limiter.Burst()]
	}
	if g.overBytes() {
		g.cutForBytes(c.remote())
		return 0, errByteLimit
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if k := g.take(n); k < n {
			n, err = k, nil
			if k == 0 {
				err = errByteLimit
			}
		}
	}
	if g.overBytes() {
		// This read's bytes are delivered; the next one fails.
		defer g.cutForBytes(c.remote())
	}
	if n > 0 && g.limiter != nil {
		if werr := g.limiter.WaitN(g.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

func (c *meteredConn) Write(p []byte) (int, error) {
	g := c.g
	written := 0
	for len(p) > 0 {
		chunk := p
		if g.limiter != nil && len(chunk) > g.limiter.Burst() {
			chunk = chunk[:g.limiter.Burst()]
		}
		k := g.take(len(chunk))
		if k == 0 {
			g.cutForBytes(c.remote())
			return written, errByteLimit
		}
		if g.limiter != nil {
			if err := g.limiter.WaitN(g.ctx, k); err != nil {
				g.unreserve(k)
				return written, err
			}
		}
		n, err := c.Conn.Write(chunk[:k])
		g.unreserve(k - n)
		written += n
		p = p[n:]
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func (c *meteredConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.g.freeSlot)
	return err
}

func (c *meteredConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *meteredConn) remote() netip.AddrPort {
	if a, ok := c.Conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}
