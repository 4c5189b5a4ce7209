package forward

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/runtime"
)

const testToken = "agent-token-123"

var networks = []string{"tcp", "unix"}

// startBackend serves h on a loopback TCP port or on a unix socket in a
// temporary directory and returns its endpoint.
func startBackend(tb testing.TB, network string, h http.Handler) runtime.Endpoint {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	if network == "unix" {
		sock := filepath.Join(tb.TempDir(), "agent.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			tb.Fatalf("listen on %s: %v", sock, err)
		}
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return runtime.Endpoint{Network: network, Address: srv.Listener.Addr().String()}
}

// startFront serves the forwarder the way the orchestrator would: every
// request under /fwd/ goes to target with the rest of the escaped path.
// Each handler run sends on done (if not nil) when it returns, even when
// the forwarder aborts it with a panic.
func startFront(tb testing.TB, f *Forwarder, target Target, done chan<- struct{}) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if done != nil {
			defer func() { done <- struct{}{} }()
		}
		f.ServeHTTP(w, r, target, strings.TrimPrefix(r.URL.EscapedPath(), "/fwd/"))
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func newForwarder(tb testing.TB, logger *slog.Logger) *Forwarder {
	tr := NewTransports()
	tb.Cleanup(tr.Close)
	return &Forwarder{Transports: tr, Logger: logger}
}

// recordingHandler keeps every log record so tests can check what was
// logged at which level.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) atLeast(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level >= level {
			out = append(out, r.Message)
		}
	}
	return out
}

// pattern is an endless deterministic byte stream, so large bodies can be
// sent without allocating them.
type pattern struct{ n byte }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = p.n
		p.n = p.n*31 + 7
	}
	return len(b), nil
}
