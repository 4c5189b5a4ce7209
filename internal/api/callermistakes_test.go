package api_test

import (
	"net/http"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestCallerMistakesThroughREST sends the caller's mistakes in calling a
// real sandbox (an unknown server tool, CRLF in forward_request's method
// or headers, TRACE and CONNECT, hop-by-hop and credential headers) to
// POST /api/servers/{server_id}/mcp/call and POST /api/forward-request:
// each is the caller's status (404, 400) naming what was wrong, never 502
// or 500; TRACE and CONNECT are refused by the streamed forward too.
func TestCallerMistakesThroughREST(t *testing.T) {
	e := newTestServer(t)
	c := e.registerClient(t, e.alice, "mistakes")
	srv := e.startServer(t, e.alice, c.ID).ServerID

	for _, m := range orchtest.CallerMistakes(srv) {
		t.Run(m.What, func(t *testing.T) {
			path := "/api/forward-request"
			if m.Op == "call_server_mcp_tool" {
				path = "/api/servers/" + srv + "/mcp/call"
			}
			d := wantError(t, e.send(t, "POST", path, m.Input, bearer(e.alice)), wire.StatusOf(m.Code), m.Words...)
			if d.Code != m.Code {
				t.Errorf("code %s, want %s", d.Code, m.Code)
			}
		})
	}
	for _, method := range []string{"TRACE", "CONNECT"} {
		r := e.send(t, method, "/api/forward/"+c.ID+"/"+srv+"/api/health", nil, bearer(e.alice))
		if r.status != http.StatusMethodNotAllowed {
			t.Errorf("streamed forward %s: %d %s, want 405", method, r.status, r.body)
		}
	}
	var ok struct {
		StatusCode int `json:"status_code"`
	}
	e.call(t, e.alice, "POST", "/api/forward-request", map[string]any{
		"server_id": srv, "path": "api/health", "method": "get", "headers": map[string]any{"X-Fine": "1"},
	}, http.StatusOK, &ok)
	if ok.StatusCode != http.StatusOK {
		t.Fatalf("a good forward_request: status %d", ok.StatusCode)
	}
}
