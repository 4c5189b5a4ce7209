package forward

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/berth-mcp/berth/internal/runtime"
)

func TestTransportsCache(t *testing.T) {
	tr := NewTransports()
	defer tr.Close()
	a := runtime.Endpoint{Network: "unix", Address: "/tmp/a.sock"}
	b := runtime.Endpoint{Network: "tcp", Address: "/tmp/a.sock"}
	if tr.For(a) != tr.For(a) {
		t.Error("For returned two transports for one endpoint")
	}
	if tr.For(a) == tr.For(b) {
		t.Error("endpoints differing in network share a transport")
	}
	old := tr.For(a)
	tr.Forget(a)
	if tr.For(a) == old {
		t.Error("Forget kept the transport")
	}
	old = tr.For(b)
	tr.Close()
	if tr.For(b) == old {
		t.Error("Close kept the transport")
	}
	var zero Transports
	if zero.For(a) == nil {
		t.Error("zero Transports returned no transport")
	}
}

// TestForwardReusesConnections sends sequential requests through the
// forwarder and counts the connections the agent accepted.
func TestForwardReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	f := newForwarder(t, nil)
	target := Target{ServerID: "s1", Endpoint: runtime.Endpoint{Network: "unix", Address: sock}, Token: testToken}
	front := startFront(t, f, target, nil)
	for i := range 10 {
		resp, err := http.Get(front.URL + "/fwd/api/health")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r2, err := f.Do(context.Background(), target, http.MethodGet, "api/health", nil, nil)
		if err != nil {
			t.Fatalf("Do %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, r2.Body)
		r2.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 sequential requests opened %d agent connections, want 1", n)
	}
}
