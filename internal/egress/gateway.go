package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// Gateway serves one sandbox's proxy and DNS. It serves either its own
// listeners (Serve: the local runtime, inside the sandbox's namespace)
// or connections and messages handed to it one by one (Start, then
// ServeConn, ServeDNSConn and AnswerDNS: a listener shared by many
// sandboxes, which attributes each connection to its sandbox first).
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

	// The sandbox's side, bounded: proxy connections, DNS over TCP
	// connections and DNS over UDP questions being answered.
	clients, dnsConns, dnsQuestions chan struct{}

	started atomic.Bool // Start was called
	running atomic.Bool // Start is done: ctx and httpL are set
	ctx     context.Context
	httpL   *chanListener
	done    chan struct{} // closed when everything Start began has ended
}

// NewGateway makes a gateway; Serve or Start runs it.
func NewGateway(cfg Config) *Gateway {
	g := &Gateway{cfg: cfg, log: cfg.Logger, dial: cfg.Dial, track: newTracker(), ctx: context.Background(),
		clients: make(chan struct{}, maxClientConns), dnsConns: make(chan struct{}, dnsTCPConns),
		dnsQuestions: make(chan struct{}, dnsInFlight), done: make(chan struct{})}
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

// Start makes the gateway serve what is handed to it (ServeConn,
// ServeDNSConn, AnswerDNS) until ctx ends. Then it closes every
// connection it was handed or opened and ends its goroutines; Done is
// closed once they have. A Gateway starts once, by Start or by Serve.
func (g *Gateway) Start(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("egress: a Gateway serves once")
	}
	g.ctx = ctx
	g.httpL = newChanListener(proxyAddr{})
	srv := g.newHTTPServer(ctx)
	g.track.goRun(func() { srv.Serve(g.httpL) })
	g.running.Store(true)
	go func() {
		<-ctx.Done()
		g.httpL.Close()
		srv.Close()
		g.track.shutdown()
		g.transport.CloseIdleConnections()
		close(g.done)
	}()
	return nil
}

// Done is closed once the gateway has stopped: its context ended, every
// connection is closed and every goroutine it started has returned.
func (g *Gateway) Done() <-chan struct{} { return g.done }

// Serve serves the listeners until ctx ends or a listener is closed; it
// closes them all and every open connection, and waits for its
// goroutines, before it returns. Any listener may be nil. It returns nil
// when ctx ended or a listener was closed, otherwise the error that
// stopped a listener.
func (g *Gateway) Serve(ctx context.Context, proxy net.Listener, dnsUDP net.PacketConn, dnsTCP net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	run := func(what string, fn func() error) {
		wg.Go(func() {
			err := fn()
			if err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("egress %s: %w", what, err)
				}
				errMu.Unlock()
			}
			cancel()
		})
	}
	if proxy != nil {
		run("proxy", func() error { return g.acceptLoop(ctx, proxy, g.ServeConn) })
	}
	if dnsUDP != nil {
		run("dns/udp", func() error { return g.serveDNSUDP(ctx, dnsUDP) })
	}
	if dnsTCP != nil {
		run("dns/tcp", func() error { return g.acceptLoop(ctx, dnsTCP, g.ServeDNSConn) })
	}
	<-ctx.Done()
	// A nil listener is a nil Closer.
	for _, l := range []io.Closer{proxy, dnsUDP, dnsTCP} {
		if l != nil {
			l.Close()
		}
	}
	wg.Wait()
	<-g.done
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

// acceptLoop accepts on l until it fails for good, handing each
// connection to serve.
func (g *Gateway) acceptLoop(ctx context.Context, l net.Listener, serve func(net.Conn)) error {
	backoff := newBackoff()
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
		serve(c)
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
