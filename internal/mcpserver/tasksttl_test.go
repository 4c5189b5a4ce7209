package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// maxTaskTTL is the cap berth puts on a task's ttl: a week in ms.
const maxTaskTTL = 7 * 24 * 60 * 60 * 1000

// TestTaskTTLHeaderAndList: a ttl asked in tools/call is granted (capped
// at a week) and reported, and tasks/get reports it in both forms of
// tasks; the extension's tasks/get is answered without an Mcp-Name header
// (only a sent one is checked); and the extension's tasks/list lists the
// caller's tasks, not another user's.
func TestTaskTTLHeaderAndList(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	bobTok, _ := e.Token(t, "bob")
	cs := e.connect(t, tok)
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "ttl"}}, &c)
	var start struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &start)

	rpc := func(tok, body string, out any) {
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
	create := func(task string) (id string, ttl *int64) {
		t.Helper()
		var created struct {
			Task struct {
				TaskID string
				TTL    *int64
			}
		}
		rpc(tok, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_bash_command","task":%s,
			"arguments":{"request":{"server_id":%q,"command":"true"}}}}`, task, start.ServerID), &created)
		return created.Task.TaskID, created.Task.TTL
	}
	for _, c := range []struct {
		task string
		want int64
	}{
		{`{"ttl":60000}`, 60000},
		{`{"ttl":99999999999999}`, maxTaskTTL},
		{`{}`, maxTaskTTL},
	} {
		if _, ttl := create(c.task); ttl == nil || *ttl != c.want {
			t.Errorf("task %s: ttl granted %v, want %d", c.task, ttl, c.want)
		}
	}
	id, _ := create(`{"ttl":60000}`)
	var got struct{ TTL *int64 }
	rpc(tok, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q}}`, id), &got)
	if got.TTL == nil || *got.TTL != 60000 {
		t.Errorf("2025-11-25 tasks/get ttl %v, want the 60000 granted", got.TTL)
	}
	status, raw := rawCall(t, e, tok, "2025-11-25", fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_bash_command","task":{"ttl":-1},
		"arguments":{"request":{"server_id":%q,"command":"true"}}}}`, start.ServerID))
	if status != 200 || !strings.Contains(raw, "-32602") || !strings.Contains(raw, "task.ttl") {
		t.Errorf("a negative ttl: %d %s, want -32602 naming task.ttl", status, raw)
	}

	ext := func(tok, method, params string, headers map[string]string) map[string]json.RawMessage {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":%q,"params":{%s"_meta":{`+
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, method, params)
		status, raw := rawCallHeaders(t, e, tok, headers, body)
		var msg struct {
			Result map[string]json.RawMessage
			Error  json.RawMessage
		}
		if status != 200 || json.Unmarshal([]byte(raw), &msg) != nil || msg.Error != nil {
			t.Fatalf("2026-07-28 %s with headers %v: %d %s", method, headers, status, raw)
		}
		return msg.Result
	}
	v2 := ext(tok, "tasks/get", fmt.Sprintf(`"taskId":%q,`, id), map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get"})
	if string(v2["taskId"]) != fmt.Sprintf("%q", id) || string(v2["ttlMs"]) != "60000" {
		t.Errorf("2026-07-28 tasks/get without Mcp-Name: %v, want the task with the ttlMs 60000 its tools/call was granted", v2)
	}

	listHeaders := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/list"}
	var mine, bobs []struct{ TaskID, Status string }
	if err := json.Unmarshal(ext(tok, "tasks/list", "", listHeaders)["tasks"], &mine); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ext(bobTok, "tasks/list", "", listHeaders)["tasks"], &bobs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range mine {
		found = found || x.TaskID == id
	}
	// Alice's tasks are her operations: the start and her four commands.
	if len(mine) != 5 || !found || len(bobs) != 0 {
		t.Errorf("2026-07-28 tasks/list: alice's %v (want her 5 operations, %s among them), bob's %v (want none)", mine, id, bobs)
	}
}
