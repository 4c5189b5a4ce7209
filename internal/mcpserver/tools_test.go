package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

var allTools = []string{
	"register_client", "stop_client", "finish_client", "start_server", "stop_server", "finish_server",
	"restart_server", "build_images_from_yaml", "get_operation_status", "get_job_status", "forward_request",
	"run_bash_command", "list_server_mcp_tools", "call_server_mcp_tool",
	"bash", "read_file", "write_file", "edit_file", "patch_file", "list_files",
	"list_clients", "list_servers", "get_server", "get_server_logs", "whoami",
	"get_client", "heartbeat_client", "list_server_operations", "create_file",
	"run_tests", "download_archive", "upload_archive", "read_audit_log", "end_session",
	"cancel_operation", "list_operations", "create_token", "list_tokens", "revoke_token", "list_images",
	"set_server_network",
}

func TestToolsAreListedWithSchemasAndHints(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	_, _ = e.Token(t, "admin")
	tok, _ := e.Token(t, "reader", "berth:read")
	cs := e.connect(t, tok) // every tool is listed even for a read-only token
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range allTools {
		tool, ok := byName[name]
		if !ok {
			t.Errorf("tool %s is not listed", name)
			continue
		}
		if tool.Description == "" || tool.Annotations == nil || tool.Annotations.DestructiveHint == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks a description, annotations or an output schema", name)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		idegym := slices.Index(allTools, name) < slices.Index(allTools, "bash")
		if idegym != strings.Contains(string(schema), `"request"`) {
			t.Errorf("tool %s: IdeGYM tools take one `request` argument, berth's take flat ones: %s", name, schema)
		}
	}
	if len(byName) != len(allTools) {
		t.Errorf("listed %d tools, want %d", len(byName), len(allTools))
	}
}

// call calls a tool and decodes its structured output.
func call(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestIdeGYMFlow runs the documented IdeGYM client flow unchanged, then
// berth's own tools on the same server.
func TestIdeGYMFlow(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	cs := e.connect(t, tok)

	var client struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "agent-run-1", "namespace": "default", "nodes_count": 0}}, &client)

	var start struct {
		OperationID string `json:"operation_id"`
		Status      string
		Result      string
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{
		"client_id": client.ID, "image_tag": "base", "server_name": "my-server", "reuse_strategy": "RESTART", "wait_seconds": 120,
	}}, &start)
	if start.Status != "SUCCEEDED" || start.OperationID == "" {
		t.Fatalf("start_server: %+v", start)
	}
	var started struct {
		ServerID string `json:"server_id"`
	}
	if err := json.Unmarshal([]byte(start.Result), &started); err != nil || started.ServerID == "" {
		t.Fatalf("start result %q: %v", start.Result, err)
	}

	var cmd struct {
		AsyncOperationID string `json:"async_operation_id"`
	}
	call(t, cs, "run_bash_command", map[string]any{"request": map[string]any{
		"client_id": client.ID, "server_id": started.ServerID, "command": `python3 -c 'print("hello")' 2>/dev/null || echo hello`,
		"command_timeout": 60.0, "max_output_bytes": 1048576,
	}}, &cmd)
	var status struct {
		Status string
		Result string
	}
	call(t, cs, "get_operation_status", map[string]any{"request": map[string]any{"operation_id": cmd.AsyncOperationID, "wait_seconds": 60}}, &status)
	var fwd struct{ Body string }
	if status.Status != "SUCCEEDED" || json.Unmarshal([]byte(status.Result), &fwd) != nil {
		t.Fatalf("run_bash_command operation: %+v", status)
	}
	var bash struct {
		Stdout   string
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(fwd.Body), &bash); err != nil || bash.Stdout != "hello\n" {
		t.Fatalf("bash body %q: %v", fwd.Body, err)
	}

	sid := started.ServerID
	var br struct {
		Stdout   string
		ExitCode int `json:"exit_code"`
	}
	call(t, cs, "bash", map[string]any{"server_id": sid, "command": "mkdir -p src && cd src && export X=42"}, nil)
	call(t, cs, "bash", map[string]any{"server_id": sid, "command": "pwd | xargs basename; echo $X; false"}, &br)
	if br.Stdout != "src\n42\n" || br.ExitCode != 1 {
		t.Fatalf("bash session: %+v", br)
	}
	call(t, cs, "write_file", map[string]any{"server_id": sid, "path": "src/a.txt", "content": "one\ntwo\n"}, nil)
	call(t, cs, "edit_file", map[string]any{"server_id": sid, "path": "src/a.txt", "start_line": 2, "end_line": 2, "new_content": "TWO"}, nil)
	call(t, cs, "patch_file", map[string]any{"server_id": sid, "path": "src/a.txt", "patch": "@@ -1,2 +1,2 @@\n-one\n+1\n TWO\n"}, nil)
	var rd struct{ Content string }
	call(t, cs, "read_file", map[string]any{"server_id": sid, "path": "src/a.txt"}, &rd)
	if rd.Content != "1\nTWO\n" {
		t.Fatalf("read_file: %q", rd.Content)
	}
	var ls struct{ Entries []struct{ Name string } }
	call(t, cs, "list_files", map[string]any{"server_id": sid, "path": "src"}, &ls)
	if len(ls.Entries) != 1 || ls.Entries[0].Name != "a.txt" {
		t.Fatalf("list_files: %+v", ls)
	}

	var tools struct{ Tools []struct{ Name string } }
	call(t, cs, "list_server_mcp_tools", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid}}, &tools)
	if !slices.ContainsFunc(tools.Tools, func(x struct{ Name string }) bool { return x.Name == "patch_file" }) {
		t.Fatalf("server tools: %+v", tools)
	}
	var served struct {
		Content []map[string]any
		IsError bool `json:"is_error"`
	}
	call(t, cs, "call_server_mcp_tool", map[string]any{"request": map[string]any{
		"client_id": client.ID, "server_id": sid, "tool_name": "read_file", "arguments": map[string]any{"path": "src/a.txt"},
	}}, &served)
	if served.IsError || !strings.Contains(fmtJSON(served.Content), "TWO") {
		t.Fatalf("call_server_mcp_tool: %+v", served)
	}

	call(t, cs, "finish_server", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid}}, nil)
	call(t, cs, "stop_server", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid}}, nil)
	call(t, cs, "stop_client", map[string]any{"request": map[string]any{"client_id": client.ID}}, nil)
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestToolErrorsAreActionable(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	aliceTok, _ := e.Token(t, "alice")
	bobTok, _ := e.Token(t, "bob")
	alice, bob := e.connect(t, aliceTok), e.connect(t, bobTok)
	var client struct{ ID string }
	call(t, alice, "register_client", map[string]any{"request": map[string]any{"name": "mine"}}, &client)

	ctx := context.Background()
	// Another user's client: an isError result that does not reveal it.
	res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "finish_client", Arguments: map[string]any{"request": map[string]any{"client_id": client.ID}}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "not found") {
		t.Fatalf("bob on alice's client: %v %s", err, text(res))
	}
	cases := []struct {
		name    string
		tool    string
		args    any
		mention string
	}{
		{"wrong type", "register_client", map[string]any{"request": map[string]any{"name": 5}}, "name"},
		{"missing request", "register_client", map[string]any{}, "request"},
		{"extra field", "get_server", map[string]any{"server_id": "x", "serverid": "y"}, "serverid"},
		{"bad server id", "get_server", map[string]any{"server_id": "no-such-server"}, "not found"},
		{"bash timeout too long", "bash", map[string]any{"server_id": "x", "command": "true", "timeout": 3601}, "timeout"},
		{"bad reuse strategy", "start_server", map[string]any{"request": map[string]any{"client_id": client.ID, "image_tag": "b", "reuse_strategy": "SOMETIMES"}}, "reuse_strategy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			msg := ""
			if err != nil {
				msg = err.Error()
			} else if res.IsError {
				msg = text(res)
			} else {
				t.Fatalf("no error: %+v", res)
			}
			if !strings.Contains(msg, c.mention) {
				t.Fatalf("error %q does not mention %q", msg, c.mention)
			}
		})
	}
	_, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Fatalf("unknown tool: %v", err)
	}
	// On the wire the answer is JSON-RPC error -32602 naming the tool
	// (with HTTP 400 from protocol 2026-07-28 on, as SEP-2575 asks).
	for _, version := range []string{"2025-06-18", ""} {
		status, body := rawCall(t, e, aliceTok, version, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
		if !strings.Contains(body, `-32602`) || !strings.Contains(body, "no_such_tool") {
			t.Fatalf("protocol %q: unknown tool answered %d %s", version, status, body)
		}
	}
}

func TestPrompts(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	cs := e.connect(t, tok)
	ctx := context.Background()
	list, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(list.Prompts) != 2 {
		t.Fatalf("prompts: %+v %v", list, err)
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "berth_start_sandbox", Arguments: map[string]string{"task": "fix the build"}})
	if err != nil || !strings.Contains(res.Messages[0].Content.(*mcp.TextContent).Text, "fix the build") {
		t.Fatalf("berth_start_sandbox: %v", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "berth_debug_server", Arguments: map[string]string{"server_id": "nope"}}); err == nil {
		t.Fatal("berth_debug_server on an unknown server succeeded")
	}
}

// TestDocsListEveryTool keeps docs/mcp.md honest: every tool is documented.
func TestDocsListEveryTool(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range allTools {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/mcp.md does not mention tool %s", name)
		}
	}
}
