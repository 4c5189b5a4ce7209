package mcpgw

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type echoIn struct {
	Text string `json:"text" jsonschema:"text to echo back"`
}

type echoOut struct {
	Text     string `json:"text"`
	Upstream string `json:"upstream"`
}

// testUpstream is a real go-sdk MCP server on a loopback port.
type testUpstream struct {
	name  string
	addr  string
	srv   *http.Server
	done  chan struct{}
	auth  string // required Authorization header, if set
	calls sync.Map
}

type upstreamKind int

const (
	streamableStateful upstreamKind = iota
	streamableStateless
	sseOnly
)

// startUpstream serves an MCP server with tools echo, fail, t1..t3 and
// the extra ones (which answer their own name) on addr ("" picks a free
// port). Its page size is 2, so listing its five
// tools takes three pages.
func startUpstream(t testing.TB, name, addr string, kind upstreamKind, auth string, extra ...string) *testUpstream {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	u := &testUpstream{name: name, addr: ln.Addr().String(), done: make(chan struct{}), auth: auth}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, &mcp.ServerOptions{PageSize: 2})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return nil, echoOut{Text: in.Text, Upstream: name}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("fail tool failed on purpose")
	})
	for _, n := range append([]string{"t1", "t2", "t3"}, extra...) {
		mcp.AddTool(s, &mcp.Tool{Name: n, Description: "Filler tool " + n}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: n}}}, nil, nil
		})
	}
	var h http.Handler
	switch kind {
	case sseOnly:
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	default:
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: kind == streamableStateless})
	}
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.auth != "" && r.Header.Get("Authorization") != u.auth {
			http.Error(w, "missing or wrong Authorization", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() {
		defer close(u.done)
		_ = u.srv.Serve(ln)
	}()
	t.Cleanup(u.stop)
	return u
}

func (u *testUpstream) url() string { return "http://" + u.addr + "/mcp" }

// stop kills the server: listener and every open connection.
func (u *testUpstream) stop() {
	_ = u.srv.Close()
	<-u.done
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func writeConfig(t testing.TB, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// harness is a Gateway served on a loopback httptest server, with Run
// going and a connected go-sdk client.
type harness struct {
	g         *Gateway
	ws        string // workspace of the backend
	dir       string // upstreams directory
	logs      *logBuffer
	session   *mcp.ClientSession
	toolsSeen chan struct{} // a tools/list_changed notification arrived
}

func newHarness(t testing.TB, setup func(dir string)) *harness {
	t.Helper()
	h := &harness{ws: t.TempDir(), dir: t.TempDir(), logs: &logBuffer{}, toolsSeen: make(chan struct{}, 16)}
	if setup != nil {
		setup(h.dir)
	}
	g, err := New(Options{
		Backend:       dirBackend{root: h.ws},
		UpstreamsDir:  h.dir,
		Logger:        h.logs.logger(),
		Version:       "1.2.3",
		RetryInterval: 25 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("MCPGW_TEST_LOG") != "" {
			t.Logf("gateway log:\n%s", h.logs)
		}
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runDone:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})

	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case h.toolsSeen <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatalf("connect to gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	h.session = cs
	return h
}

func (h *harness) toolNames(t testing.TB) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range h.session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

func (h *harness) hasTool(t testing.TB, name string) bool {
	_, ok := h.toolNames(t)[name]
	return ok
}

func (h *harness) call(t testing.TB, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: protocol error %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured returns the structured content of a result as a map.
func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structured content is %T (%v), want an object; content %q", res.StructuredContent, res.StructuredContent, resultText(res))
	}
	return m
}

func (h *harness) upstream(name string) (info struct {
	found, connected bool
	tools            int
	lastErr          string
}) {
	for _, u := range h.g.Upstreams() {
		if u.Name == name {
			info.found, info.connected, info.tools, info.lastErr = true, u.Connected, u.Tools, u.LastError
		}
	}
	return info
}
