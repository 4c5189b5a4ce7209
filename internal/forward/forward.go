package forward

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// agentHost is the host every forwarded URL names. The transport dials the
// sandbox's endpoint whatever the host says, so it only shows up in the
// agent's Host header.
const agentHost = "sandbox"

// Target is where and how to reach one sandbox's agent.
type Target struct {
	ServerID string
	// Endpoint is a unix socket path or a tcp host:port.
	Endpoint runtime.Endpoint
	// Token is the per-sandbox agent token, sent as Authorization: Bearer.
	Token string
}

// Forwarder proxies requests to sandbox agents. Transports must be set;
// Logger and Budget may be nil (nothing is logged; no overall bound). A
// Forwarder must not be copied after first use.
type Forwarder struct {
	Transports *Transports
	Logger     *slog.Logger
	// Budget, when set, bounds the memory of every answer read whole
	// through ReadBody and RoundTripper, together.
	Budget *Budget
	// Observe, when set, is around each request Do sends (a span).
	Observe observe.Start
	// Inject, when set, writes the trace context of a request's context
	// into what goes to the agent, so its work joins the caller's trace.
	Inject func(ctx context.Context, h http.Header)
	// IdleTimeout, when set, ends a request ServeHTTP streams (WebSocket
	// connections included) once no byte has moved to or from the agent
	// for that long, with a gateway_timeout error (see WithIdle).
	IdleTimeout time.Duration

	buffers bufferPool
}

// ServeHTTP forwards r to the agent of target at path, the agent-internal
// path without a leading slash (such as "api/tools/bash"); the query of r
// is kept. Bodies stream both ways, WebSocket upgrades included. A path
// that tries to escape is answered with 400, an agent that cannot be
// reached with 502 and one that moves nothing for f.IdleTimeout with 504,
// as wire.Error JSON (once the answer has started, the connection is cut
// instead). Responses are sanitized
// (SanitizeResponse): nothing a sandbox answers acts on berth's origin.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request, target Target, path string) {
	if f.Transports == nil {
		writeError(w, wire.Errorf(wire.CodeInternal, "forward to server %s: forwarder has no transports", target.ServerID))
		return
	}
	decoded, escaped, err := agentURLPath(path)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, idle, stop := WithIdle(r.Context(), target.ServerID, "the forwarded request", f.IdleTimeout)
	defer stop()
	r = r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = idle.CallerReader(r.Body)
	}
	tw := &trackingWriter{ResponseWriter: w, idle: idle}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := pr.Out.URL
			u.Scheme, u.Host, u.Path, u.RawPath = "http", agentHost, decoded, escaped
			pr.Out.Host = ""
			PrepareHeader(pr.Out.Header, target.Token)
			if f.Inject != nil {
				f.Inject(pr.Out.Context(), pr.Out.Header)
			}
			pr.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			SanitizeResponse(resp)
			resp.Body = idle.AgentBody(resp.Body)
			return nil
		},
		Transport: f.Transports.For(target.Endpoint),
		// Flush every write so streamed output (SSE, long bash runs)
		// reaches the caller as the agent produces it.
		FlushInterval: -1,
		BufferPool:    &f.buffers,
		ErrorLog:      log.New(proxyLogWriter{log: f.logger(), r: r, serverID: target.ServerID}, "", 0),
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			f.proxyError(tw, r, target.ServerID, err)
		},
	}
	proxy.ServeHTTP(tw, r)
}

// proxyError answers a failed forward unless the caller already got
// something or has gone away.
func (f *Forwarder) proxyError(w *trackingWriter, r *http.Request, serverID string, err error) {
	log := f.logger().With("server_id", serverID, "method", r.Method)
	if cut := Cut(r.Context()); cut != nil {
		log.Warn("forward: cut by its deadline", "err", cut)
		if !w.sent && !w.hijacked {
			writeError(w, cut)
		}
		return
	}
	if r.Context().Err() != nil {
		log.Debug("forward: caller went away", "err", err)
		return
	}
	if w.sent || w.hijacked {
		log.Warn("forward: failed after the response started", "err", err)
		return
	}
	log.Warn("forward: failed", "err", err)
	writeError(w, gatewayError(serverID, err))
}

// gatewayError turns a transport failure into a bad_gateway error that
// names the server. Dial errors lose the socket path or address: that is
// berth's business, not the caller's.
func gatewayError(serverID string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return wire.Errorf(wire.CodeBadGateway, "cannot reach server %s: %w", serverID, op.Err)
	}
	return wire.Errorf(wire.CodeBadGateway, "forward to server %s: %w", serverID, err)
}

func (f *Forwarder) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

func writeError(w http.ResponseWriter, err error) {
	d := wire.DetailOf(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(wire.StatusOf(d.Code))
	_ = json.NewEncoder(w).Encode(wire.Error{Error: d})
}

// proxyLogWriter receives the few messages ReverseProxy logs itself, such
// as a body copy cut short. When the caller has gone away that is expected
// and logged at debug level only; a deadline's cut is not.
type proxyLogWriter struct {
	log      *slog.Logger
	r        *http.Request
	serverID string
}

func (p proxyLogWriter) Write(b []byte) (int, error) {
	level := slog.LevelWarn
	if p.r.Context().Err() != nil && Cut(p.r.Context()) == nil {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, "forward: "+strings.TrimSpace(string(b)), "server_id", p.serverID)
	return len(b), nil
}

// bufferPool lends ReverseProxy its copy buffers so 32 KiB is not
// allocated per request. The zero value is ready to use.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == copyBufferSize {
		buf = buf[:copyBufferSize]
		b.p.Put(&buf)
	}
}
