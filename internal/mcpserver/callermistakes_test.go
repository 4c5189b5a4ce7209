package mcpserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// TestCallerMistakesThroughMCP sends the caller's mistakes in calling a
// real sandbox (an unknown server tool, CRLF in forward_request's method
// or headers, TRACE and CONNECT, hop-by-hop and credential headers) from
// the go-sdk client through berth's /mcp: each is a tool error with the
// caller's code (not_found, bad_request) naming what was wrong, never a
// gateway or internal error.
func TestCallerMistakesThroughMCP(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	ctx := context.Background()
	cs := e.connect(t, tok)
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "mistakes"}}, &c)
	var op struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &op)
	server := op.ServerID
	if server == "" {
		t.Fatal("start_server answered no server_id")
	}

	for _, m := range orchtest.CallerMistakes(server) {
		t.Run(m.What, func(t *testing.T) {
			// Both are IdeGYM's tools, whose arguments are one request.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: m.Op, Arguments: map[string]any{"request": m.Input}})
			if err != nil {
				t.Fatalf("%s: %v", m.Op, err)
			}
			got := text(res)
			if !res.IsError || !strings.Contains(got, "("+m.Code+")") {
				t.Fatalf("%s answered %q (error %v), want a %s tool error", m.Op, got, res.IsError, m.Code)
			}
			for _, w := range m.Words {
				if !strings.Contains(got, w) {
					t.Errorf("%q does not name %q", got, w)
				}
			}
		})
	}
	// The same server still answers a request that is right.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "forward_request", Arguments: map[string]any{"request": map[string]any{
		"server_id": server, "path": "api/health", "method": "get", "headers": map[string]any{"X-Fine": "1"},
	}}})
	if err != nil || res.IsError || !strings.Contains(text(res), "200") {
		t.Fatalf("a good forward_request: %v %q", err, text(res))
	}
}
