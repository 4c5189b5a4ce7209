// Package telemetry puts berth's observers together the one way serve
// wires them: metrics (internal/metrics) when asked for, traces
// (internal/tracing) when the OTLP environment is set, the access log
// (internal/httplog) always, each turned into the hooks the API, the MCP
// endpoint, the orchestrator, the runtime and the store take.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/httplog"
	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/tracing"
)

// serverCountsTTL is how long the servers-by-state counts are reused
// between scrapes: Prometheus servers scraping every replica must not
// each cost a query.
const ServerCountsTTL = 5 * time.Second

// Set is what berth measures with; a nil member is off.
type Set struct {
	Metrics *metrics.Metrics
	Tracing *tracing.Tracing
}

// FromEnv makes the metrics when withMetrics and the tracing when the
// OTLP environment asks for it.
func FromEnv(ctx context.Context, withMetrics bool) (Set, error) {
	var o Set
	if withMetrics {
		o.Metrics = metrics.New()
	}
	tr, err := tracing.FromEnv(ctx)
	if err != nil {
		return o, err
	}
	if tr.Enabled() {
		o.Tracing = tr
	}
	return o, nil
}

// Shutdown sends the spans still buffered.
func (o Set) Shutdown(ctx context.Context) {
	if o.Tracing != nil {
		o.Tracing.Shutdown(ctx)
	}
}

// QueryTracer is for store.OpenTraced: nil without tracing.
func (o Set) QueryTracer() pgx.QueryTracer {
	if o.Tracing == nil {
		return nil
	}
	return o.Tracing.QueryTracer()
}

// WatchStore adds the database's collectors: servers by state, the pool.
func (o Set) WatchStore(st *store.Store, log *slog.Logger) {
	if o.Metrics != nil {
		o.Metrics.WatchServers(st, ServerCountsTTL, log)
		o.Metrics.WatchPool(st.Pool)
	}
}

// WatchSpace adds the runtime's free space gauges, when it keeps
// sandboxes on a filesystem of berth's.
func (o Set) WatchSpace(rt runtime.Runtime, log *slog.Logger) {
	if r, ok := runtime.As[runtime.SpaceReporter](rt); ok && o.Metrics != nil {
		o.Metrics.WatchSpace(r, log)
	}
}

// Runtime wraps rt so its calls are measured.
func (o Set) Runtime(rt runtime.Runtime) runtime.Runtime {
	var hooks []observe.Hook
	if o.Metrics != nil {
		hooks = append(hooks, o.Metrics.Runtime())
	}
	if o.Tracing != nil {
		hooks = append(hooks, o.Tracing.Runtime())
	}
	return runtime.Observed(rt, observe.Join(hooks...))
}

// Orchestrator is orchestrator.Config.Observe.
func (o Set) Orchestrator() observe.Hooks {
	var hs []observe.Hooks
	if o.Metrics != nil {
		hs = append(hs, o.Metrics.Hooks())
	}
	if o.Tracing != nil {
		hs = append(hs, o.Tracing.Hooks())
	}
	return observe.JoinHooks(hs...)
}

// Tool is mcpserver.Options.Tool.
func (o Set) Tool() observe.Hook {
	var hooks []observe.Hook
	if o.Tracing != nil {
		hooks = append(hooks, o.Tracing.Tool())
	}
	if o.Metrics != nil {
		hooks = append(hooks, o.Metrics.Tool())
	}
	return observe.Join(hooks...)
}

// AuthFailed is auth.MiddlewareOptions.Failed.
func (o Set) AuthFailed() func(auth.Failure) {
	if o.Metrics == nil {
		return nil
	}
	return o.Metrics.AuthFailed()
}

// HTTP is api.Options.Observe: the span first, so that every other observer
// and the handlers run inside it.
func (o Set) HTTP(log *slog.Logger) []observe.HTTPObserver {
	var out []observe.HTTPObserver
	if o.Tracing != nil {
		out = append(out, o.Tracing.HTTP())
	}
	if o.Metrics != nil {
		out = append(out, o.Metrics.HTTP())
	}
	return append(out, httplog.Observer(log))
}

// ListenMetrics serves /metrics on addr until ctx ends. The listener is
// separate from berth's own and has no authentication: the operator
// chooses who reaches it (loopback, a private network).
func (o Set) ListenMetrics(ctx context.Context, addr string, log *slog.Logger) error {
	if o.Metrics == nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics listener stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return nil
}
