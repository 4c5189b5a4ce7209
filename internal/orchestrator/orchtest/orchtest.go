// Package orchtest starts real orchestrators for tests of the packages
// built on top of one (REST, MCP): a fresh PostgreSQL database, a local
// runtime running real berth-agent processes, and the service's
// background work, all torn down when the test ends.
package orchtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// ServerKey is the server key of every test orchestrator.
var ServerKey = []byte("orchtest-server-key-0123456789-abcdef")

// BuildAgent builds berth-agent into a fresh directory that sandboxes of
// any uid can reach, and returns its path and a cleanup function. Call it
// once from TestMain.
func BuildAgent() (string, func(), error) {
	dir, err := os.MkdirTemp("", "berth-agent-bin-")
	if err != nil {
		return "", nil, err
	}
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "berth-agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/berth-mcp/berth/cmd/berth-agent").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build berth-agent: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Env is one running orchestrator.
type Env struct {
	Svc     *orchestrator.Service
	Store   *store.Store
	Runtime *local.Runtime
	DataDir string
}

// New starts an orchestrator using the agent binary at agentBin. Zero
// fields of cfg get test defaults (a short lease and watch interval).
func New(t testing.TB, agentBin string, cfg orchestrator.Config) *Env {
	t.Helper()
	st := storetest.New(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	rt, err := local.New(local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ids, _ := rt.List(context.Background())
		for _, id := range ids {
			if err := rt.Delete(context.Background(), id); err != nil {
				t.Errorf("delete sandbox %s: %v", id, err)
			}
		}
	})
	if cfg.ServerKey == nil {
		cfg.ServerKey = ServerKey
	}
	if cfg.OperationLease == 0 {
		cfg.OperationLease = 2 * time.Second
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 500 * time.Millisecond
	}
	svc, err := orchestrator.New(st, rt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("orchestrator Run did not return within 60s")
		}
	})
	return &Env{Svc: svc, Store: st, Runtime: rt, DataDir: dir}
}

// Token creates a user (the first one of an Env becomes admin) and a
// session token with the given scopes (none = the defaults), and returns
// the token and its principal.
func (e *Env) Token(t testing.TB, user string, scopes ...string) (string, rbac.Principal) {
	t.Helper()
	tok, _, err := e.Svc.CreateToken(context.Background(), orchestrator.CreateTokenRequest{Username: user, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Svc.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok, p
}

// Serve serves the handler that build makes for the server's own URL on a
// loopback port until the test ends, and returns the URL. The handler is
// built before the first request can arrive.
func Serve(t testing.TB, build func(url string) http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	srv := &http.Server{Handler: build(url), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return url
}

// Main is TestMain for packages whose tests start sandboxes: it builds
// berth-agent once, stores its path in *agentBin, runs the tests and
// removes the binary.
func Main(m *testing.M, agentBin *string) {
	bin, cleanup, err := BuildAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*agentBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}
