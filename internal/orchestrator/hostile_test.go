package orchestrator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// running is a server running for alice on a fresh orchestrator.
type running struct {
	e      *orchtest.Env
	alice  rbac.Principal
	server string
}

func newRunning(t *testing.T, cfg orchestrator.Config) running {
	t.Helper()
	e := newService(t, cfg)
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "running")
	srv := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"}).ServerID
	return running{e: e, alice: alice, server: srv}
}

// newHostile starts a server and puts h in the place of its agent (see
// orchtest.Env.StandIn): the sandbox answers for itself.
func newHostile(t *testing.T, cfg orchestrator.Config, h http.Handler) running {
	t.Helper()
	r := newRunning(t, cfg)
	r.e.StandIn(t, r.server, h)
	return r
}

// runBash runs a command through run_bash_command and returns the
// finished operation.
func (h running) runBash(t *testing.T, req orchestrator.RunBashRequest) orchestrator.Operation {
	t.Helper()
	req.ServerID, req.WaitSeconds = h.server, deadline.Seconds()
	if req.Command == "" {
		req.Command = "true"
	}
	op, err := h.e.Svc.RunBashCommand(context.Background(), h.alice, req)
	if err != nil {
		t.Fatalf("run_bash_command: %v", err)
	}
	if op.Status != orchestrator.OpSucceeded && op.Status != orchestrator.OpFailed {
		t.Fatalf("operation %s is %s after the wait", op.ID, op.Status)
	}
	return op
}

// echoMCP is an MCP server with one tool, echo, served statelessly as
// the agent serves its own.
func echoMCP() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "stand-in"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// TestHostileAnswersAreSanitized has a sandbox answer berth's calls with
// cookies for berth's origin, origin-wide policies and HTML: what berth
// stores (run_bash_command's result) and returns (forward_request) is
// sanitized, and its MCP bridge talks to the sandbox with the agent token
// only.
func TestHostileAnswersAreSanitized(t *testing.T) {
	var mu sync.Mutex
	var mcpAuth []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/tools/bash", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.BashResult{Stdout: "hi\n"})
	})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<script>fetch('/api/whoami')</script>")
	})
	mcpHandler := echoMCP()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		mcpAuth = append(mcpAuth, r.Header.Values("Authorization")...)
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	})
	h := newHostile(t, orchestrator.Config{}, orchtest.WithHostileHeaders(mux))
	ctx := context.Background()

	op := h.runBash(t, orchestrator.RunBashRequest{})
	var fr orchestrator.ForwardedResponse
	if stored := op.IdeGYM("").Result; stored == nil || json.Unmarshal([]byte(*stored), &fr) != nil {
		t.Fatalf("run_bash_command: %+v, want a forwarded response", op)
	}
	if bad := orchtest.Unsanitized(orchtest.Header(fr.Headers)); len(bad) > 0 {
		t.Errorf("run_bash_command stored the sandbox's headers: %q", bad)
	}

	fr, err := h.e.Svc.ForwardRequest(ctx, h.alice, orchestrator.ForwardRequest{ServerID: h.server, Path: "page"})
	if err != nil {
		t.Fatal(err)
	}
	if bad := orchtest.Unsanitized(orchtest.Header(fr.Headers)); len(bad) > 0 {
		t.Errorf("forward_request returned the sandbox's headers: %q", bad)
	}

	res, err := h.e.Svc.CallServerTool(ctx, h.alice, orchestrator.CallServerToolRequest{ServerID: h.server, ToolName: "echo", Arguments: map[string]any{"text": "ok"}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("call through the MCP bridge: %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	target, err := h.e.Svc.ForwardTarget(ctx, h.alice, "", h.server, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	want := "Bearer " + target.Token
	for _, got := range mcpAuth {
		if got != want {
			t.Errorf("the MCP bridge sent Authorization %q, want the agent token only", got)
		}
	}
	if len(mcpAuth) == 0 {
		t.Error("the stand-in saw no MCP request")
	}
}
