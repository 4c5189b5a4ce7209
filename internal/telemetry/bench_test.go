package telemetry_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/telemetry"
	"github.com/berth-mcp/berth/internal/tracing"
)

// BenchmarkObservedBash: what observing costs the hot path, the bash
// tool over /mcp (a session exec): the same call through the API and
// /mcp with no observers and with them, interleaved in rounds of 50 on
// one orchestrator; it reports the median ratio observed/plain.
func BenchmarkObservedBash(b *testing.B) {
	for _, c := range []struct {
		name string
		set  func() telemetry.Set
	}{
		{"metrics+log", func() telemetry.Set { return telemetry.Set{Metrics: metrics.New()} }},
		{"metrics+log+traces", func() telemetry.Set {
			return telemetry.Set{Metrics: metrics.New(), Tracing: tracing.New(sdktrace.NewTracerProvider())}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, c.set())
			tok, _ := e.Token(b, "alice")
			_, serverID := e.startServer(b, tok, nil)
			plain := *e
			plain.url = servePlain(b, e)
			args := map[string]any{"server_id": serverID, "command": "true"}
			round := func(e *env) time.Duration {
				start := time.Now()
				for range 50 {
					e.callTool(b, tok, "bash", args, nil)
				}
				return time.Since(start)
			}
			round(&plain)
			round(e)
			var ratios []float64
			for b.Loop() {
				tp, to := round(&plain), round(e)
				ratios = append(ratios, float64(to)/float64(tp))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "observed/plain")
		})
	}
}

// servePlain serves the env's orchestrator with no observer at all.
func servePlain(tb testing.TB, e *env) string {
	return orchtest.Serve(tb, func(url string) http.Handler {
		authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
		hosts := hostguard.Options{PublicURL: url}
		mcpH := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}})
		return api.NewServer(e.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpH.Handler()})
	})
}
