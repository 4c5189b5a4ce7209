package api_test

import (
	"net/http"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestExecRoundTrips pins how many PostgreSQL round trips a warm exec
// costs on each REST path (the token's principal cached, the server's
// activity recent): each one is paid on every command of an agent's loop,
// so one more must be a decision (docs/design.md "Round trips of an
// exec"), not an accident. Session exec: the server row, the audit entry.
// run_bash_command: the server row, the operation with its audit entry,
// its outcome (returned, not re-read); it made 9 before (a transaction of
// three, a separate audit, the server read again, a worker woken to claim
// nothing, the outcome read back).
func TestExecRoundTrips(t *testing.T) {
	e := newTestServer(t)
	c := e.registerClient(t, e.alice, "rt")
	srv := e.startServer(t, e.alice, c.ID).ServerID

	for _, tc := range []struct {
		name string
		want int
		call func()
	}{
		{"session exec", 2, func() {
			var res wire.BashResult
			e.call(t, e.alice, "POST", "/api/servers/"+srv+"/sessions/main/exec",
				wire.SessionExecRequest{Command: "true"}, http.StatusOK, &res)
			if res.ExitCode != 0 {
				t.Fatalf("session exec true: %+v", res)
			}
		}},
		{"run_bash_command with wait_seconds", 3, func() {
			var op orchestrator.Operation
			e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash",
				map[string]any{"command": "true", "wait_seconds": waitSeconds}, http.StatusOK, &op)
			if res := bashResult(t, op); res.ExitCode != 0 {
				t.Fatalf("run_bash_command true: %+v", res)
			}
		}},
	} {
		got := e.Queries.MinRoundTrips(t, 8, tc.call)
		if len(got) != tc.want {
			t.Errorf("%s: %d round trips, want %d:%s", tc.name, len(got), tc.want, storetest.Describe(got))
		}
	}
}
