package orchestrator_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// callerHeaders are what a caller may send berth to reach a sandbox:
// berth's credentials and forwarding claims, none of which may arrive.
var callerHeaders = map[string]string{
	"Authorization":       "Bearer berth_caller-token",
	"Proxy-Authorization": "Basic Y2FsbGVyOnNlY3JldA==",
	"Cookie":              "__Host-berth_session=caller",
	"Berth-Session-Token": "berth_caller-token",
	"Berth-Agent-Token":   "forged",
	"Forwarded":           "for=6.6.6.6;host=evil.example",
	"X-Forwarded-For":     "6.6.6.6",
	"X-Forwarded-Host":    "evil.example",
	"X-Forwarded-Port":    "6666",
	"X-Forwarded-Proto":   "gopher",
	"X-Real-Ip":           "6.6.6.6",
}

// echoAgent stands in for a sandbox's agent, answering every call berth
// makes well enough and recording the headers each one arrived with.
type echoAgent struct {
	mu   sync.Mutex
	seen map[string]http.Header // "METHOD path" -> headers
}

func (a *echoAgent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/sessions/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.BashResult{Stdout: "ok"})
	})
	mux.HandleFunc("GET /api/fs/cat", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.ReadResult{Content: "x"})
	})
	mux.HandleFunc("GET /api/fs/archive", func(w http.ResponseWriter, r *http.Request) {
		tw := tar.NewWriter(w)
		tw.Close()
	})
	mux.HandleFunc("PUT /api/fs/archive", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		wire.WriteJSON(w, http.StatusOK, wire.FileResult{Path: "."})
	})
	mux.HandleFunc("POST /api/rewards/test", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.RewardResult{Total: 1, Passed: 1})
	})
	mux.Handle("/mcp", echoMCP())
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen[r.Method+" "+r.URL.Path] = r.Header.Clone()
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

// TestAgentRequestHeaders sends berth's caller credentials and forwarding
// claims down every path into a sandbox (the streamed forward,
// forward_request, the MCP bridge and berth's own calls): each request
// arrives with the agent token alone and no claim but those berth makes,
// and forward_request, whose headers are data, refuses them.
func TestAgentRequestHeaders(t *testing.T) {
	agent := &echoAgent{seen: map[string]http.Header{}}
	h := newHostile(t, orchestrator.Config{}, agent.handler())
	svc, ctx := h.e.Svc, context.Background()
	fail := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// forward_request takes headers as data: it refuses each of these,
	// naming it, rather than drop it unsaid.
	for k, v := range callerHeaders {
		_, err := svc.ForwardRequest(ctx, h.alice, orchestrator.ForwardRequest{ServerID: h.server, Path: "echo", Headers: map[string]string{k: v}})
		wantCode(t, err, wire.CodeBadRequest, "headers["+k+"]")
	}
	_, err := svc.ForwardRequest(ctx, h.alice, orchestrator.ForwardRequest{ServerID: h.server, Path: "echo", Headers: map[string]string{"X-Fine": "1"}})
	fail("forward_request", err)
	target, err := svc.ForwardTarget(ctx, h.alice, "", h.server, "echo")
	fail("forward target", err)
	r := httptest.NewRequest(http.MethodPut, "/api/forward/c/s/echo", strings.NewReader("body"))
	for k, v := range callerHeaders {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	svc.Forwarder().ServeHTTP(rec, r, target, "echo")
	if rec.Code != http.StatusOK {
		t.Fatalf("forward: %d %s", rec.Code, rec.Body)
	}
	_, err = svc.CallServerTool(ctx, h.alice, orchestrator.CallServerToolRequest{ServerID: h.server, ToolName: "echo", Arguments: map[string]any{"text": "x"}})
	fail("MCP bridge", err)
	_, err = svc.SessionExec(ctx, h.alice, h.server, "", wire.SessionExecRequest{Command: "true"})
	fail("session exec", err)
	_, err = svc.ReadFile(ctx, h.alice, orchestrator.ReadFileRequest{ServerID: h.server, Path: "f"})
	fail("read file", err)
	_, err = svc.DownloadArchive(ctx, h.alice, orchestrator.ArchiveRequest{ServerID: h.server}, io.Discard)
	fail("download archive", err)
	_, err = h.upload(".", tarOf(t, entry{name: "f", body: "x"}))
	fail("upload archive", err)
	h.runTests(t, orchestrator.RunTestsRequest{Command: "true"})

	agent.mu.Lock()
	defer agent.mu.Unlock()
	want := "Bearer " + target.Token
	for _, path := range []string{"GET /echo", "PUT /echo", "POST /mcp", "POST /api/sessions/default/exec", "GET /api/fs/cat",
		"GET /api/fs/archive", "PUT /api/fs/archive", "POST /api/rewards/test"} {
		got, ok := agent.seen[path]
		if !ok {
			t.Errorf("%s: the agent never saw it", path)
			continue
		}
		if v := got.Values("Authorization"); len(v) != 1 || v[0] != want {
			t.Errorf("%s: Authorization %q, want the agent token alone", path, v)
		}
		for k := range callerHeaders {
			if k == "Authorization" {
				continue
			}
			v := got.Values(k)
			// The streamed forward says who berth's caller is, as berth
			// saw it: that claim is berth's, never the caller's.
			if path == "PUT /echo" && (k == "X-Forwarded-For" || k == "X-Forwarded-Host" || k == "X-Forwarded-Proto") {
				if len(v) != 1 || v[0] == callerHeaders[k] || strings.Contains(v[0], "6.6.6.6") {
					t.Errorf("%s: %s %q, want berth's own claim", path, k, v)
				}
				continue
			}
			if len(v) > 0 {
				t.Errorf("%s: the agent got the caller's %s: %q", path, k, v)
			}
		}
	}
	if got := agent.seen["PUT /echo"].Get("X-Forwarded-For"); got != "192.0.2.1" {
		t.Errorf("forward: X-Forwarded-For %q, want the caller's address as berth saw it", got)
	}
	if !bytes.Equal([]byte(agent.seen["GET /echo"].Get("Authorization")), []byte(want)) {
		t.Error("forward_request lost the agent token")
	}
}
