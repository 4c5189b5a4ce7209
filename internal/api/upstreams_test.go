package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// TestUpstreamToolsOverREST: an MCP server started inside a real sandbox
// and declared in POST /api/servers (mcp_upstreams) is listed by GET
// /api/servers/{server_id}/mcp/tools as <name>_<tool> next to the
// agent's built-in tools, and POST /api/servers/{server_id}/mcp/call
// calls it.
func TestUpstreamToolsOverREST(t *testing.T) {
	e := newTestServer(t)
	c := e.registerClient(t, e.alice, "upstreams")
	var op orchestrator.Operation
	e.call(t, e.alice, "POST", "/api/servers", map[string]any{
		"client_id": c.ID, "image_tag": e.UpstreamImage(t), "wait_seconds": waitSeconds,
		"mcp_upstreams": []map[string]any{{"name": "tools", "url": "http://127.0.0.1:9000/mcp", "headers": map[string]string{"X-Key": "k"}}},
	}, http.StatusOK, &op)
	var started orchestrator.StartServerResult
	opResult(t, op, &started)
	srv := started.ServerID
	if !slices.Contains(started.Server.MCPUpstreams, "tools") {
		t.Errorf("the started server names upstreams %q, want tools", started.Server.MCPUpstreams)
	}

	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{
		"command": orchtest.UpstreamCommand("normal", "127.0.0.1:9000"), "wait_seconds": waitSeconds,
	}, http.StatusOK, &op)
	if res := bashResult(t, op); res.ExitCode != 0 {
		t.Fatalf("start the upstream: %+v", res)
	}

	// The agent connects to the upstream once it listens.
	var names []string
	for end := time.Now().Add(deadline); ; {
		var tools orchestrator.ServerTools
		e.call(t, e.alice, "GET", "/api/servers/"+srv+"/mcp/tools", nil, http.StatusOK, &tools)
		names = names[:0]
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if slices.Contains(names, "tools_echo") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server lists %q, want tools_echo", names)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"read_file", "bash", "tools_file"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %q: %s missing", names, want)
		}
	}

	var res orchestrator.ServerToolResult
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/mcp/call", map[string]any{
		"tool_name": "tools_echo", "arguments": map[string]any{"text": "over REST"},
	}, http.StatusOK, &res)
	if got := orchtest.ToolText(res.Content); res.IsError || got != "echo: over REST" {
		t.Fatalf("tools_echo answered %q (is_error %v), want the upstream's echo", got, res.IsError)
	}
}
