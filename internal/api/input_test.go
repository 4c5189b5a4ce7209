package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/orchestrator"
)

// Bad requests get 400 with a message naming what was wrong; oversized
// bodies 413; unknown routes 404 and wrong methods 405, all as JSON.
func TestBadInput(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "inputs")
	op := func() orchestrator.Operation {
		var op orchestrator.Operation
		e.call(t, e.alice, "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain"}, http.StatusOK, &op)
		return op
	}()

	cases := []struct {
		name, method, path string
		body               any
		status             int
		words              []string
	}{
		{"malformed JSON", "POST", "/api/clients", `{"name": "x"`, 400, []string{"malformed JSON"}},
		{"malformed JSON syntax", "POST", "/api/clients", `{"name" "x"}`, 400, []string{"malformed JSON"}},
		{"empty body", "POST", "/api/clients", "", 400, []string{"missing required field", "name"}},
		{"not an object", "POST", "/api/clients", `[1, 2]`, 400, []string{"JSON object"}},
		{"trailing data", "POST", "/api/clients", `{"name": "x"} {}`, 400, []string{"after the JSON object"}},
		{"unknown field", "POST", "/api/clients", `{"name": "x", "colour": "red"}`, 400, []string{"unknown field", "colour"}},
		{"wrong type", "POST", "/api/clients", `{"name": 5}`, 400, []string{`"name"`, "string", "number"}},
		{"empty name", "POST", "/api/clients", `{"name": "  "}`, 400, []string{"name"}},
		{"invalid namespace", "POST", "/api/clients", `{"name": "x", "namespace": "Not_A_Label"}`, 400, []string{"namespace", "Not_A_Label"}},
		{"missing image_tag", "POST", "/api/servers", map[string]any{"client_id": client.ID}, 400, []string{"image_tag"}},
		{"unknown image_tag", "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "No-Such-Image"}, 400, []string{"image_tag", `"No-Such-Image"`, "base"}},
		{"missing client_id", "POST", "/api/servers", map[string]any{"image_tag": "plain"}, 400, []string{"client_id"}},
		{"bad reuse_strategy", "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain", "reuse_strategy": "SOMETIMES"}, 400, []string{"reuse_strategy", "SOMETIMES"}},
		{"bad env name", "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain", "env": map[string]string{"1BAD": "x"}}, 400, []string{"env", "1BAD"}},
		{"wait_seconds too long", "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain", "wait_seconds": 301}, 400, []string{"wait_seconds", "301"}},
		{"wait_seconds negative", "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain", "wait_seconds": -1}, 400, []string{"wait_seconds"}},
		{"wait_seconds wrong type", "POST", "/api/servers", `{"client_id": "x", "image_tag": "plain", "wait_seconds": "soon"}`, 400, []string{"wait_seconds"}},
		{"query wait_seconds too long", "GET", "/api/operations/" + op.ID + "?wait_seconds=1000", nil, 400, []string{"wait_seconds"}},
		{"query wait_seconds not a number", "GET", "/api/operations/" + op.ID + "?wait_seconds=abc", nil, 400, []string{"wait_seconds", "abc"}},
		{"query tail not a number", "GET", "/api/servers/" + op.ServerID + "/logs?tail=abc", nil, 400, []string{"tail", "abc"}},
		{"query tail negative", "GET", "/api/servers/" + op.ServerID + "/logs?tail=-3", nil, 400, []string{"tail"}},
		{"bash without command", "POST", "/api/servers/" + op.ServerID + "/bash", `{}`, 400, []string{"command"}},
		{"bash server_id mismatch", "POST", "/api/servers/" + op.ServerID + "/bash", map[string]any{"server_id": client.ID, "command": "true"}, 400, []string{"server_id", client.ID}},
		{"restart malformed body", "POST", "/api/servers/" + op.ServerID + "/restart", `{"wait_seconds":`, 400, []string{"malformed JSON"}},
		{"restart wait_seconds too long", "POST", "/api/servers/" + op.ServerID + "/restart", `{"wait_seconds": 1e6}`, 400, []string{"wait_seconds"}},
		{"body too large", "POST", "/api/clients", `{"name": "` + strings.Repeat("x", 4<<20) + `"}`, 413, []string{"larger than"}},
		{"unknown route", "GET", "/api/nothing-here", nil, 404, []string{"/api/nothing-here"}},
		{"unknown route outside api", "GET", "/favicon.ico", nil, 404, []string{"/favicon.ico"}},
		{"wrong method", "PUT", "/api/clients", `{}`, 405, []string{"PUT", "/api/clients", "GET or POST"}},
		{"wrong method on item", "PATCH", "/api/servers/" + op.ServerID, `{}`, 405, []string{"PATCH", "GET or DELETE"}},
		{"trace is not forwarded", "TRACE", "/api/forward/" + client.ID + "/" + op.ServerID + "/api/capabilities", nil, 405, []string{"TRACE"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.send(t, c.method, c.path, c.body, bearer(e.alice))
			wantError(t, r, c.status, c.words...)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if c.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}

	// None of the refused calls registered a client or started a server.
	var clients catalog.ClientList
	e.call(t, e.admin, "GET", "/api/clients", nil, http.StatusOK, &clients)
	if len(clients.Clients) != 1 {
		t.Errorf("%d clients after refused registrations, want 1", len(clients.Clients))
	}
	var servers catalog.ServerList
	e.call(t, e.admin, "GET", "/api/servers", nil, http.StatusOK, &servers)
	if len(servers.Servers) != 1 {
		t.Errorf("%d servers after refused starts, want 1", len(servers.Servers))
	}
}

// A body the size limit allows is accepted: the limit is configurable
// and not off by one.
func TestBodyLimitIsExact(t *testing.T) {
	e := newTestServerOpts(t, 64)
	body := `{"name":"` + strings.Repeat("x", 64-len(`{"name":""}`)) + `"}`
	if len(body) != 64 {
		t.Fatalf("body is %d bytes", len(body))
	}
	e.call(t, e.alice, "POST", "/api/clients", body, http.StatusOK, nil)
	over := `{"name":"` + strings.Repeat("x", 65-len(`{"name":""}`)) + `"}`
	wantError(t, e.send(t, "POST", "/api/clients", over, bearer(e.alice)), http.StatusRequestEntityTooLarge, "64 bytes")
	// Trailing space past the limit is still too large, not "data after
	// the object".
	wantError(t, e.send(t, "POST", "/api/clients", body+" ", bearer(e.alice)), http.StatusRequestEntityTooLarge, "64 bytes")
}
