package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

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
const serverCountsTTL = 5 * time.Second

// observers are what serve measures with: metrics when --metrics-listen
// is set, traces when the OTLP environment is, the access log always.
type observers struct {
	metrics *metrics.Metrics // nil: off
	tracing *tracing.Tracing // nil or not Enabled: off
}

func newObservers(ctx context.Context, metricsListen string) (observers, error) {
	var o observers
	if metricsListen != "" {
		o.metrics = metrics.New()
	}
	tr, err := tracing.FromEnv(ctx)
	if err != nil {
		return o, err
	}
	if tr.Enabled() {
		o.tracing = tr
	}
	return o, nil
}

func (o observers) shutdown(ctx context.Context) {
	if o.tracing != nil {
		o.tracing.Shutdown(ctx)
	}
}

func (o observers) watchStore(st *store.Store, log *slog.Logger) {
	if o.metrics != nil {
		o.metrics.WatchServers(st, serverCountsTTL, log)
		o.metrics.WatchPool(st.Pool)
	}
}

func (o observers) runtime(rt runtime.Runtime) runtime.Runtime {
	var hooks []observe.Hook
	if o.metrics != nil {
		hooks = append(hooks, o.metrics.Runtime())
	}
	if o.tracing != nil {
		hooks = append(hooks, o.tracing.Runtime())
	}
	return runtime.Observed(rt, observe.Join(hooks...))
}

func (o observers) orchestrator() observe.Hooks {
	var hs []observe.Hooks
	if o.metrics != nil {
		hs = append(hs, o.metrics.Hooks())
	}
	if o.tracing != nil {
		hs = append(hs, o.tracing.Hooks())
	}
	return observe.JoinHooks(hs...)
}

func (o observers) tool() observe.Hook {
	var hooks []observe.Hook
	if o.tracing != nil {
		hooks = append(hooks, o.tracing.Tool())
	}
	if o.metrics != nil {
		hooks = append(hooks, o.metrics.Tool())
	}
	return observe.Join(hooks...)
}

func (o observers) authFailed() func(auth.Failure) {
	if o.metrics == nil {
		return nil
	}
	return o.metrics.AuthFailed()
}

// http observes requests: the span first, so that every other observer
// and the handlers run inside it.
func (o observers) http(log *slog.Logger) []observe.HTTPObserver {
	var out []observe.HTTPObserver
	if o.tracing != nil {
		out = append(out, o.tracing.HTTP())
	}
	if o.metrics != nil {
		out = append(out, o.metrics.HTTP())
	}
	return append(out, httplog.Observer(log))
}

// listenMetrics serves /metrics on addr until ctx ends. The listener is
// separate from berth's own and has no authentication: the operator
// chooses who reaches it (loopback, a private network).
func (o observers) listenMetrics(ctx context.Context, addr string, log *slog.Logger) error {
	if o.metrics == nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.metrics.Handler())
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
