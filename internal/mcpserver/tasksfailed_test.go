package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// TestFailedOperationIsAFailedTask: a task whose operation FAILED (a
// command the agent refused: its cwd does not exist) is "failed" in both
// forms of tasks, read on the same task: 2025-11-25's tasks/get, whose
// tasks/result is the tool's answer with isError, and the 2026-07-28
// extension's tasks/get, which carries the failure as a JSON-RPC error
// (the extension keeps "failed" for those) instead of a "completed" task
// holding a FAILED operation.
func TestFailedOperationIsAFailedTask(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	cs := e.connect(t, tok)
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "failing"}}, &c)
	var start struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &start)

	rpc := func(body string, out any) {
		t.Helper()
		status, raw := rawCall(t, e, tok, "2025-11-25", body)
		var msg struct {
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if status != 200 || json.Unmarshal([]byte(raw), &msg) != nil || msg.Error != nil {
			t.Fatalf("%s: %d %s", body, status, raw)
		}
		if err := json.Unmarshal(msg.Result, out); err != nil {
			t.Fatalf("%s: result %s: %v", body, msg.Result, err)
		}
	}
	var created struct {
		Task struct{ TaskID, Status string }
	}
	rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_bash_command","task":{"ttl":60000},
		"arguments":{"request":{"server_id":%q,"command":"true","cwd":"no-such-dir"}}}}`, start.ServerID), &created)
	id := created.Task.TaskID
	var result struct {
		IsError           bool
		StructuredContent struct{ Status string }
	}
	rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":%q}}`, id), &result)
	if !result.IsError || result.StructuredContent.Status != "FAILED" {
		t.Fatalf("2025-11-25 tasks/result: %+v, want the tool's answer, a FAILED operation, with isError", result)
	}

	var legacy struct{ Status, StatusMessage string }
	rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":%q}}`, id), &legacy)
	if legacy.Status != "failed" || !strings.Contains(legacy.StatusMessage, "no-such-dir") {
		t.Errorf("2025-11-25 tasks/get: %+v, want failed naming the cwd", legacy)
	}

	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":%q,"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, id)
	status, raw := rawCallHeaders(t, e, tok, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": id}, body)
	var v2 struct {
		Result struct {
			Status string
			Result json.RawMessage
			Error  *struct {
				Code    int
				Message string
				Data    struct{ Status string }
			}
		}
	}
	if status != 200 || json.Unmarshal([]byte(raw), &v2) != nil {
		t.Fatalf("2026-07-28 tasks/get: %d %s", status, raw)
	}
	got := v2.Result
	if got.Status != "failed" || got.Result != nil || got.Error == nil {
		t.Fatalf("2026-07-28 tasks/get: %s, want a failed task with an error and no result", raw)
	}
	if got.Error.Code != -32602 || !strings.Contains(got.Error.Message, "no-such-dir") || !strings.Contains(got.Error.Message, "(bad_request)") || got.Error.Data.Status != "FAILED" {
		t.Errorf("2026-07-28 failed task's error: %+v, want -32602 naming the cwd and berth's code, with the failed operation as data", got.Error)
	}
}
