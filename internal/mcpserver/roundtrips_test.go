package mcpserver_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestExecRoundTrips pins how many PostgreSQL round trips a warm exec
// costs through /mcp (the token's principal cached, the server's activity
// recent), as the REST test of the same name does for REST: bash is the
// server row and the audit entry; run_bash_command with wait_seconds the
// server row, the operation with its audit entry in one statement, and
// its outcome (it made 9 before).
func TestExecRoundTrips(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	cs := e.connect(t, tok)
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "rt"}}, &c)
	var op struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &op)

	for _, tc := range []struct {
		tool string
		args map[string]any
		want int
	}{
		{"bash", map[string]any{"server_id": op.ServerID, "command": "true"}, 2},
		{"run_bash_command", map[string]any{"request": map[string]any{"server_id": op.ServerID, "command": "true", "wait_seconds": 60}}, 3},
	} {
		got := e.Queries.MinRoundTrips(t, 8, func() {
			if res := call(t, cs, tc.tool, tc.args, nil); res.IsError {
				t.Fatalf("%s: %s", tc.tool, text(res))
			}
		})
		if len(got) != tc.want {
			t.Errorf("%s: %d round trips, want %d:%s", tc.tool, len(got), tc.want, storetest.Describe(got))
		}
	}
}
