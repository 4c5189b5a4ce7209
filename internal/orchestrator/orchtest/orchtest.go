// Package orchtest starts real orchestrators for tests of the packages
// built on top of one (REST, MCP): a fresh PostgreSQL database, a local
// runtime running real berth-agent processes, and the service's
// background work, all torn down when the test ends.
package orchtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// ServerKey is the server key of every test orchestrator.
var ServerKey = []byte("orchtest-server-key-0123456789-abcdef")

// BuildAgent builds berth-agent into a fresh directory that sandboxes of
// any uid can reach, and returns its path and a cleanup function. Call it
// once from TestMain.
func BuildAgent() (string, func(), error) { return buildAgent() }

func buildAgent() (string, func(), error) {
	dir, err := os.MkdirTemp("", "berth-agent-bin-")
	if err != nil {
		return "", nil, err
	}
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "berth-agent")
	// Static, as make build and the releases build it, so that it runs
	// in sandboxes of any image.
	build := exec.Command("go", "build", "-o", bin, "github.com/berth-mcp/berth/cmd/berth-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build berth-agent: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Env is one running orchestrator.
type Env struct {
	Svc   *orchestrator.Service
	Store *store.Store
	// Queries counts the store's round trips (storetest.Counter).
	Queries *storetest.Counter
	Runtime *local.Runtime
	DataDir string
}

// New starts an orchestrator using the agent binary at agentBin. Zero
// fields of cfg get test defaults (see Config); the runtime logs to
// cfg.Logger.
func New(t testing.TB, agentBin string, cfg orchestrator.Config) *Env {
	t.Helper()
	dir := DataDir(t)
	rt := NewRuntime(t, agentBin, dir, cfg.Logger)
	e := NewOn(t, rt, cfg)
	e.Runtime, e.DataDir = rt, dir
	return e
}

// NewOn starts an orchestrator on a fresh database over rt, any runtime
// (Env.Runtime and Env.DataDir stay unset unless it is a local one).
func NewOn(t testing.TB, rt runtime.Runtime, cfg orchestrator.Config) *Env {
	t.Helper()
	st, queries := storetest.NewCounted(t)
	svc, err := orchestrator.New(st, rt, Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	Run(t, svc)
	return &Env{Svc: svc, Store: st, Queries: queries}
}

// Config fills the zero fields of cfg with what every test wants: the
// shared ServerKey (replicas of one test must share it), a short lease and
// a short watch interval.
func Config(cfg orchestrator.Config) orchestrator.Config {
	if cfg.ServerKey == nil {
		cfg.ServerKey = ServerKey
	}
	if cfg.OperationLease == 0 {
		cfg.OperationLease = 2 * time.Second
	}
	if cfg.WatchInterval == 0 {
		cfg.WatchInterval = 500 * time.Millisecond
	}
	return cfg
}

// Images are the image tags tests start servers from besides base: the
// local runtime refuses an image it has no template of, so DataDir makes
// an empty template of each.
var Images = []string{"img", "plain"}

// DataDir returns a fresh runtime data directory that sandboxes of other
// uids can traverse, with an empty template of each of Images.
func DataDir(t testing.TB) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for _, img := range Images {
		if err := os.MkdirAll(filepath.Join(dir, "images", img), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// NewRuntime returns a local runtime on dir running the agent binary at
// agentBin, logging to log (nil = nowhere). Every sandbox it holds is
// deleted when the test ends, so no agent process outlives the test.
func NewRuntime(t testing.TB, agentBin, dir string, log *slog.Logger) *local.Runtime {
	t.Helper()
	return NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, Logger: log})
}

// SandboxDisk is the workspace volume of test sandboxes unless a test
// asks for another: volumes are allocated whole, and tests on a shared
// machine must not each take gigabytes.
const SandboxDisk = 256 << 20

// NewRuntimeWith is NewRuntime with every option given: full isolation
// and SandboxDisk volumes unless opts says otherwise.
func NewRuntimeWith(t testing.TB, opts local.Options) *local.Runtime {
	t.Helper()
	if opts.Isolation == "" {
		opts.Isolation = local.IsolationFull
	}
	if opts.Limits.DiskBytes == 0 {
		opts.Limits.DiskBytes = SandboxDisk
	}
	rt, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		ids, err := rt.List(ctx)
		if err != nil {
			t.Errorf("list sandboxes: %v", err)
		}
		for _, id := range ids {
			if err := rt.Delete(ctx, id); err != nil {
				t.Errorf("delete sandbox %s: %v", id, err)
			}
		}
		rt.Close()
	})
	return rt
}

// runStopLimit bounds how long Run may take to return once cancelled:
// generous, for a busy 2-core machine.
const runStopLimit = 90 * time.Second

// Run runs svc's background work until the returned stop is called or the
// test ends; stop waits for Run to return and fails the test if Run
// failed. Tests that stop one replica of several call stop themselves.
func Run(t testing.TB, svc *orchestrator.Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(runStopLimit):
				t.Errorf("Run did not return within %s of its cancellation", runStopLimit)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Logger returns a logger that writes to the test when BERTH_TEST_LOG is
// set, and discards everything otherwise, so a failing test can be rerun
// with the orchestrator's own account of what happened.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("BERTH_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
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

// StandIn puts h in the place of a running server's agent, as root in a
// sandbox can do (take over the agent process, or bind its socket): h is
// served on a fresh unix socket that becomes the server's endpoint, so
// every call berth makes to that server's agent reaches h. Everything an
// agent answers is untrusted; tests of what berth does with hostile
// answers use this. The real agent keeps running and goes with its
// sandbox as usual.
func (e *Env) StandIn(t testing.TB, serverID string, h http.Handler) {
	t.Helper()
	e.StandInServer(t, serverID, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second})
}

// StandInServer is StandIn with the stand-in's whole server given, for
// tests that need to tell its connections apart (ConnContext).
func (e *Env) StandInServer(t testing.TB, serverID string, srv *http.Server) {
	t.Helper()
	// Not t.TempDir: a unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "standin-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		os.RemoveAll(dir)
	})
	if _, err := e.Store.SetServerRunning(context.Background(), serverID, store.Endpoint{Network: "unix", Address: sock}); err != nil {
		t.Fatalf("point server %s at the stand-in: %v", serverID, err)
	}
}
