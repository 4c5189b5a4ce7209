package mcpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// cli-mcp-server's one-tool flow with a real MCP client: bash without a
// server, routed by the X-Session-ID header, starts the caller's sandbox
// on the first call and reuses its shell and files after; end_session
// ends it and the next call starts afresh.
func TestBashWithoutServerFollowsTheSessionHeader(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	connect := func(session string) *mcp.ClientSession {
		t.Helper()
		h := http.Header{"Authorization": {"Bearer " + tok}}
		if session != "" {
			h.Set("X-Session-ID", session)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "cli-mcp-style", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: headerTransport{h}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	type bashOut struct {
		Stdout, Session string
		ServerID        string `json:"server_id"`
		ExitCode        int    `json:"exit_code"`
		Started         bool
	}
	cs := connect("task-1")
	var first, second bashOut
	call(t, cs, "bash", map[string]any{"command": "mkdir -p src && cd src && export A=1 && echo made > f"}, &first)
	call(t, cs, "bash", map[string]any{"command": "pwd; echo $A; cat f"}, &second)
	if !first.Started || second.Started || first.ServerID == "" || second.ServerID != first.ServerID || first.Session != "task-1" {
		t.Fatalf("first %+v, second %+v: want one sandbox started by the first call", first, second)
	}
	if second.Stdout != "/workspace/src\n1\nmade\n" {
		t.Fatalf("the session's shell and files did not persist: %q", second.Stdout)
	}
	// Another session of the same user is another sandbox; the session
	// argument names one without the header.
	var other bashOut
	call(t, connect(""), "bash", map[string]any{"session": "task-2", "command": "ls"}, &other)
	if other.ServerID == first.ServerID || !other.Started || other.Stdout != "" {
		t.Fatalf("session task-2: %+v, want a fresh sandbox", other)
	}
	// Bad or missing session keys are refused, naming what is wrong.
	for session, want := range map[string]string{"Not A Label": "RFC 1123", "": "X-Session-ID"} {
		res, err := connect(session).CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("session %q: %v %s, want an error naming %q", session, err, text(res), want)
		}
	}
	var ended struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "end_session", map[string]any{}, &ended)
	if ended.ServerID != first.ServerID {
		t.Fatalf("end_session ended %+v, want server %s", ended, first.ServerID)
	}
	var again bashOut
	call(t, cs, "bash", map[string]any{"command": "ls src 2>&1; pwd"}, &again)
	if !again.Started || again.ServerID == first.ServerID || !strings.Contains(again.Stdout, "No such file") {
		t.Fatalf("after end_session: %+v, want a fresh sandbox without the old files", again)
	}
}
