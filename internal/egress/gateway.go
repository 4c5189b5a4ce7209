package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one sandbox's gateway carries.
type Limits struct {
	// BytesPerSecond: 0 = unlimited; both directions together, shared by
	// all the sandbox's connections.
	BytesPerSecond int64
	// Connections: concurrent upstream connections; 0 = unlimited; over
	// it the new connection is refused ("connection limit").
	Connections int
	// Bytes: total bytes through the gateway for this sandbox; 0 =
	// unlimited; past it, open connections are cut and new ones refused
	// ("byte limit").
	Bytes int64
}

// Config configures a Gateway.
type Config struct {
	Guard *Guard
	// Resolver is the upstream DNS for berth's own lookups (nil:
	// net.DefaultResolver).
	Resolver *net.Resolver
	// Dial connects upstream (nil: a net.Dialer); it gets the checked
	// address, never a name.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Policy is read on every new connection and DNS question, so a
	// changed policy applies at once.
	Policy func(ctx context.Context) (Policy, error)
	// Refused is told of each refusal, from many goroutines at once; it
	// must not block. A sandbox can cause refusals as fast as it can ask,
	// so what it records must be bounded.
	Refused func(Refusal)
	// Allowed is told of each allowed connection; may be nil.
	Allowed func()
	Limits  Limits
	// UsedBytes were used before this gateway (a restart); they count
	// toward Limits.Bytes.
	UsedBytes int64
	Logger    *slog.Logger
}

// Bounds of the sandbox's side.
const (
	maxClientConns = 1024 // connections to the proxy port at once; more are closed
	sniffTimeout   = 30 * time.Second
)

// Gateway serves one sandbox's proxy and DNS listeners.
type Gateway struct {
	cfg       Config
	log       *slog.Logger
	dec       *decider
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	limiter   *rate.Limiter // nil: no bandwidth limit
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	track     *tracker

	used      atomic.Int64 // bytes through the gateway, UsedBytes included
	upstreams atomic.Int64 // upstream connections open
	cutOnce   sync.Once    // the byte limit is reported once

	served atomic.Bool
	ctx    context.Context // Serve's; set before any connection is served
}

// NewGateway makes a gateway; Serve runs it.
func NewGateway(cfg Config) *Gateway {
	g := &Gateway{cfg: cfg, log: cfg.Logger, dial: cfg.Dial, track: newTracker(), ctx: context.Background()}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: dialTimeout}
		g.dial = d.DialContext
	}
	guard := cfg.Guard
	if guard == nil {
		guard = &Guard{}
	}
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	policy := cfg.Policy
	if policy == nil {
		policy = func(context.Context) (Policy, error) { return Policy{Egress: None}, nil }
	}
	g.dec = &decider{guard: guard, resolver: resolver, policy: policy, memory: newMemory()}
	if bps := cfg.Limits.BytesPerSecond; bps > 0 {
		// Small bursts keep the rate even; each read and write is cut to
		// the burst so that WaitN can always be satisfied.
		burst := int(min(max(bps/10, 1024), 64<<10))
		g.limiter = rate.NewLimiter(rate.Limit(bps), burst)
	}
	g.used.Store(cfg.UsedBytes)
	g.transport = g.newTransport()
	g.proxy = g.newReverseProxy()
	return g
}

// Bytes is the bytes carried so far, UsedBytes included, for the caller
// to persist.
func (g *Gateway) Bytes() int64 { return g.used.Load() }

// Serve serves until ctx ends or a listener is closed; it closes them
// all and every open connection, and waits for its goroutines, before it
// returns. Any listener may be nil. It returns nil when ctx ended or a
// listener was closed, otherwise the error that stopped a listener.
func (g *Gateway) Serve(ctx context.Context, proxy net.Listener, dnsUDP net.PacketConn, dnsTCP net.Listener) error {
	if !g.served.CompareAndSwap(false, true) {
		return errors.New("egress: a Gateway serves once")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.ctx = ctx

	var errMu sync.Mutex
	var firstErr error
	run := func(what string, fn func() error) {
		g.track.goRun(func() {
			err := fn()
			if err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("egress %s: %w", what, err)
				}
				errMu.Unlock()
			}
			cancel()
		})
	}
	var httpL *chanListener
	var srv *http.Server
	if proxy != nil {
		httpL = newChanListener(proxy.Addr())
		srv = g.newHTTPServer(ctx)
		run("proxy", func() error { return g.serveProxy(ctx, proxy, httpL) })
		run("http", func() error { return srv.Serve(httpL) })
	}
	if dnsUDP != nil {
		run("dns/udp", func() error { return g.serveDNSUDP(ctx, dnsUDP) })
	}
	if dnsTCP != nil {
		run("dns/tcp", func() error { return g.serveDNSTCP(ctx, dnsTCP) })
	}
	<-ctx.Done()

	if proxy != nil {
		proxy.Close()
		httpL.Close()
		srv.Close()
	}
	if dnsUDP != nil {
		dnsUDP.Close()
	}
	if dnsTCP != nil {
		dnsTCP.Close()
	}
	g.track.shutdown()
	g.transport.CloseIdleConnections()
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

// serveProxy accepts the sandbox's proxy connections and sniffs each:
// SOCKS5 begins with its version byte 5, anything else is taken for HTTP.
func (g *Gateway) serveProxy(ctx context.Context, l net.Listener, httpL *chanListener) error {
	return g.acceptLoop(ctx, l, maxClientConns, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(sniffTimeout))
		r := bufio.NewReaderSize(c, 16)
		first, err := r.Peek(1)
		if err != nil {
			c.Close()
			return
		}
		if first[0] == 5 {
			g.socks(ctx, c, r)
			return
		}
		c.SetReadDeadline(time.Time{})
		httpL.hand(&peekedConn{Conn: c, r: r})
	})
}

// acceptLoop accepts on l until it fails for good, serving each
// connection on a tracked goroutine; past maxConns open at once, a new
// connection is closed at once. serve must see to it that the
// connection is closed in the end (or hand it to what will).
func (g *Gateway) acceptLoop(ctx context.Context, l net.Listener, maxConns int, serve func(net.Conn)) error {
	backoff := newBackoff()
	sem := make(chan struct{}, maxConns)
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors and the like: wait, as net/http does.
			g.log.Warn("egress accept failed", "err", err)
			if !backoff.wait(ctx) {
				return ctx.Err()
			}
			continue
		}
		backoff.reset()
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		tc := g.track.add(c, true, func() { <-sem })
		if tc == nil {
			return net.ErrClosed
		}
		if !g.track.goRun(func() { serve(tc) }) {
			tc.Close()
			return net.ErrClosed
		}
	}
}

// refuse reports r and returns it.
func (g *Gateway) refuse(r *Refusal) *Refusal {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	g.log.Debug("egress refused", "name", r.Name, "addr", r.Addr, "port", r.Port, "reason", r.Reason)
	if g.cfg.Refused != nil {
		g.cfg.Refused(*r)
	}
	return r
}

// stdLogger is net/http's error log, at debug: what it reports comes
// from the sandbox.
func (g *Gateway) stdLogger() *log.Logger {
	return slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)
}

// backoff spaces retries after transient errors, 5 ms doubling to 1 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) reset() { b.d = 0 }

// wait sleeps the next interval, or returns false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	b.d = min(max(2*b.d, 5*time.Millisecond), time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
