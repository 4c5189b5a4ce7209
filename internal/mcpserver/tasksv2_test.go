package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// TestTasksExtension drives the 2026-07-28 tasks extension
// (io.modelcontextprotocol/tasks) with @modelcontextprotocol/ext-tasks: a
// bash task the server creates for a client that opted in, polled to its
// inline result; a running one cancelled (its command really stops);
// another user refused; and the methods the extension dropped refused.
func TestTasksExtension(t *testing.T) {
	node := interopNode(t)
	e := newEnv(t, mcpserver.GuardOptions{})
	e.Token(t, "admin")
	alice, _ := e.Token(t, "alice")
	bob, _ := e.Token(t, "bob")
	out := runNode(t, node, 3*time.Minute, []string{"BERTH_MCP_URL=" + e.url, "BERTH_TOKEN=" + alice, "BERTH_TOKEN2=" + bob}, alice, "tasks-ext-client.mjs", "flow")
	var s struct {
		Era, Version                         string
		Extensions                           map[string]any
		PlainKind, PlainStdout               string
		Kind, TaskID                         string
		CreatedResultType, CreatedStatus     string
		Outcome                              string
		Statuses                             []string
		ResultIsError                        bool
		ResultStatus, Stdout                 string
		LegacyStatus, UpdateAck              string
		OtherGet, OtherCancel, OtherUpdate   string
		CancelOutcome, AfterCancel, LateFile string
		CancelAgain                          string
		ListError, ResultError               int
		Listed                               map[string]string
		OtherListed                          bool
		Missing                              string
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	t.Logf("summary: %+v", s)
	if _, ok := s.Extensions["io.modelcontextprotocol/tasks"]; !ok || s.Era != "modern" || s.Version != "2026-07-28" {
		t.Errorf("server/discover: era %q, version %q, extensions %v: want 2026-07-28 with io.modelcontextprotocol/tasks", s.Era, s.Version, s.Extensions)
	}
	if s.PlainKind != "immediate" || s.PlainStdout != "plain\n" {
		t.Errorf("ordinary tool: %s execution, stdout %q: want an immediate result", s.PlainKind, s.PlainStdout)
	}
	if s.Kind != "task" || s.CreatedResultType != "task" || s.CreatedStatus != "working" {
		t.Errorf("task tool: %s execution, created resultType %q status %q: want a working task", s.Kind, s.CreatedResultType, s.CreatedStatus)
	}
	if s.Outcome != "completed" || len(s.Statuses) == 0 || s.Statuses[len(s.Statuses)-1] != "completed" {
		t.Errorf("task outcome %q, polled %v: want completed", s.Outcome, s.Statuses)
	}
	if s.ResultIsError || s.ResultStatus != "SUCCEEDED" || s.Stdout != "done\n" {
		t.Errorf("inline result: isError %v, status %q, stdout %q", s.ResultIsError, s.ResultStatus, s.Stdout)
	}
	if s.LegacyStatus != "completed" || s.UpdateAck != "ack" {
		t.Errorf("same task in the 2025-11-25 form: %q; tasks/update: %q", s.LegacyStatus, s.UpdateAck)
	}
	if s.CancelOutcome != "cancelled" || s.AfterCancel != "cancelled" || s.LateFile != "no" || s.CancelAgain != "ack" {
		t.Errorf("cancel: outcome %q, then %q, late file %q, again %q", s.CancelOutcome, s.AfterCancel, s.LateFile, s.CancelAgain)
	}
	for what, got := range map[string]string{"get": s.OtherGet, "cancel": s.OtherCancel, "update": s.OtherUpdate, "unknown task": s.Missing} {
		if !strings.Contains(got, "-32602") || !strings.Contains(got, "not found") {
			t.Errorf("another user's %s: %q, want -32602 not found", what, got)
		}
	}
	if s.ResultError != -32601 {
		t.Errorf("tasks/result %d: want -32601 (not in the extension)", s.ResultError)
	}
	if s.ListError != 0 || s.Listed[s.TaskID] != "completed" || len(s.Listed) != 2 || s.OtherListed {
		t.Errorf("tasks/list: error %d, listed %v, another user's lists them %v: want both tasks, the first completed, only to their owner", s.ListError, s.Listed, s.OtherListed)
	}
}

// TestTaskExtensionSurvivesReplica is TestTaskSurvivesReplica with the
// extension's client: created on replica A, resumed and settled on B
// after A died.
func TestTaskExtensionSurvivesReplica(t *testing.T) {
	taskSurvivesReplica(t, "tasks-ext-client.mjs")
}

// TestTasksExtensionRefusals sends what a client could get wrong when it
// opts into the extension: headers that disagree with the body, an
// update without responses, no taskId; and an opt-in that is not one (a
// null capability) is served the 2025-11-25 way.
func TestTasksExtensionRefusals(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	msg := func(method, params, extension string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + params + `"_meta":{` +
			`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":` + extension + `}}}}}`
	}
	v2026 := func(method, name string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
	}
	cases := []struct {
		name, body string
		headers    map[string]string
		status     int
		want       []string
	}{
		{"Mcp-Name of another task", msg("tasks/get", `"taskId":"a",`, "{}"), v2026("tasks/get", "b"), 400, []string{"-32020", `Mcp-Name header: want \"a\"`}},
		{"Mcp-Method of another method", msg("tasks/cancel", `"taskId":"a",`, "{}"), v2026("tasks/get", "a"), 400, []string{"-32020", "Mcp-Method header"}},
		{"Mcp-Name of another tool", msg("tools/call", `"name":"run_bash_command","arguments":{},`, "{}"), v2026("tools/call", "bash"), 400, []string{"-32020", "tool name"}},
		{"no taskId", msg("tasks/get", "", "{}"), v2026("tasks/get", ""), 200, []string{"-32602", "taskId: want"}},
		{"update without responses", msg("tasks/update", `"taskId":"a",`, "{}"), v2026("tasks/update", "a"), 200, []string{"-32602", "inputResponses: want an object"}},
		{"null capability is no opt-in", msg("tasks/list", "", "null"), nil, 200, []string{`"tasks":[]`}},
		{"string capability is no opt-in", msg("tasks/list", "", `"yes"`), nil, 200, []string{`"tasks":[]`}},
	}
	for _, c := range cases {
		status, body := rawCallHeaders(t, e, tok, c.headers, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, status, c.status, body)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: answer %s, want it to contain %s", c.name, body, w)
			}
		}
	}
}
