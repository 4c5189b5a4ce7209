package telemetry_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/telemetry"
)

// BenchmarkRequestObservers: the observers' own cost per request on a
// handler that does nothing: none (the request id and status capture
// alone), and the metrics with the access log (JSON, to io.Discard).
func BenchmarkRequestObservers(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, c := range []struct {
		name      string
		observers []observe.HTTPObserver
	}{
		{"none", nil},
		{"metrics+log", telemetry.Set{Metrics: metrics.New()}.HTTP(log)},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := chi.NewRouter()
			r.Use(observe.Middleware(c.observers...))
			r.Get("/api/servers/{server_id}", func(http.ResponseWriter, *http.Request) {})
			req := httptest.NewRequest("GET", "/api/servers/42", nil)
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
