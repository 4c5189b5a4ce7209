package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// Another member's clients, servers, operations and forwards answer 404
// exactly as missing ones do, for reads and writes alike, and change
// nothing.
func TestOtherUsersResourcesAreNotFound(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "alice-run")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	var op orchestrator.Operation
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{"command": "true", "wait_seconds": waitSeconds}, http.StatusOK, &op)

	const missing = "00000000-0000-4000-8000-000000000000"
	fwd := "/api/forward/" + client.ID + "/" + srv + "/api/capabilities"
	cases := []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/clients/" + client.ID, nil},
		{"POST", "/api/clients/" + client.ID + "/heartbeat", nil},
		{"POST", "/api/clients/" + client.ID + "/finish", nil},
		{"DELETE", "/api/clients/" + client.ID, nil},
		{"GET", "/api/servers?client_id=" + client.ID, nil},
		{"POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain"}},
		{"GET", "/api/servers/" + srv, nil},
		{"GET", "/api/servers/" + srv + "/logs", nil},
		{"POST", "/api/servers/" + srv + "/finish", nil},
		{"POST", "/api/servers/" + srv + "/restart", nil},
		{"POST", "/api/servers/" + srv + "/bash", map[string]any{"command": "touch /tmp/bob-was-here"}},
		{"POST", "/api/servers/" + srv + "/sessions/s/exec", wire.SessionExecRequest{Command: "true"}},
		{"POST", "/api/servers/" + srv + "/exec/stream", map[string]any{"command": "touch /tmp/bob-streamed"}},
		{"DELETE", "/api/servers/" + srv, nil},
		{"GET", "/api/operations/" + op.ID, nil},
		{"GET", fwd, nil},
		{"POST", "/api/forward/" + client.ID + "/" + srv + "/api/tools/bash", map[string]any{"command": "true"}},
		{"GET", "/api/ws-forward/" + client.ID + "/" + srv + "/api/capabilities", nil},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			d := wantError(t, e.send(t, c.method, c.path, c.body, bearer(e.bob)), http.StatusNotFound)
			if strings.Contains(d.Message, "alice") {
				t.Errorf("the 404 names the owner: %q", d.Message)
			}
			// A missing id answers the same way.
			hide := strings.NewReplacer(client.ID, missing, srv, missing, op.ID, missing)
			var body any
			if c.body != nil {
				raw, _ := json.Marshal(c.body)
				body = hide.Replace(string(raw))
			}
			wantError(t, e.send(t, c.method, hide.Replace(c.path), body, bearer(e.alice)), http.StatusNotFound)
		})
	}

	// Nothing bob tried took effect; the owner and a global admin still
	// see a running server.
	for _, tok := range []string{e.alice, e.admin} {
		var got orchestrator.Server
		e.call(t, tok, "GET", "/api/servers/"+srv, nil, http.StatusOK, &got)
		if got.Status != orchestrator.ServerRunning {
			t.Fatalf("after bob's attempts the server is %s, want RUNNING", got.Status)
		}
	}
	e.call(t, e.alice, "GET", fwd, nil, http.StatusOK, nil)
}

// A token without the scope a call needs gets 403 with an RFC 6750
// insufficient_scope challenge naming the scope, with those the token
// already has so that a step-up keeps them.
func TestMissingScopeIsForbiddenWithChallenge(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "scopes")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	readOnly, _ := e.Token(t, "alice", "berth:read")
	noExec, _ := e.Token(t, "alice", "berth:read", "berth:write")

	// Reading is fine with berth:read.
	e.call(t, readOnly, "GET", "/api/clients/"+client.ID, nil, http.StatusOK, nil)
	e.call(t, readOnly, "GET", "/api/servers/"+srv, nil, http.StatusOK, nil)

	cases := []struct {
		name, token, method, path string
		body                      any
		scope, challenge          string
	}{
		{"start server read-only", readOnly, "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain"}, "berth:write", "berth:write berth:read"},
		{"delete server read-only", readOnly, "DELETE", "/api/servers/" + srv, nil, "berth:write", "berth:write berth:read"},
		{"register client read-only", readOnly, "POST", "/api/clients", map[string]any{"name": "x"}, "berth:write", "berth:write berth:read"},
		{"bash without exec", noExec, "POST", "/api/servers/" + srv + "/bash", map[string]any{"command": "true"}, "berth:exec", "berth:exec berth:read berth:write"},
		{"forward without exec", noExec, "GET", "/api/forward/" + client.ID + "/" + srv + "/api/capabilities", nil, "berth:exec", "berth:exec berth:read berth:write"},
		{"streamed exec without exec", noExec, "POST", "/api/servers/" + srv + "/exec/stream", map[string]any{"command": "true"}, "berth:exec", "berth:exec berth:read berth:write"},
		{"set network read-only", readOnly, "PUT", "/api/servers/" + srv + "/network", map[string]any{"network": map[string]any{"egress": "none"}}, "berth:write", "berth:write berth:read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.send(t, c.method, c.path, c.body, bearer(c.token))
			d := wantError(t, r, http.StatusForbidden, c.scope)
			if d.Code != wire.CodeForbidden {
				t.Errorf("code %q, want %q", d.Code, wire.CodeForbidden)
			}
			ch := r.header.Get("WWW-Authenticate")
			for _, want := range []string{"Bearer ", `error="insufficient_scope"`, `scope="` + c.challenge + `"`} {
				if !strings.Contains(ch, want) {
					t.Errorf("WWW-Authenticate %q lacks %s", ch, want)
				}
			}
		})
	}
	// The refused calls changed nothing.
	var got orchestrator.Server
	e.call(t, e.alice, "GET", "/api/servers/"+srv, nil, http.StatusOK, &got)
	if got.Status != orchestrator.ServerRunning {
		t.Fatalf("server is %s after refused calls, want RUNNING", got.Status)
	}
}

// Requests without a usable credential get 401 with a Bearer challenge;
// only a credential that was sent earns error="invalid_token".
func TestUnauthenticated(t *testing.T) {
	e := newTestServer(t)
	wellFormed, _, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	revoked, tok, err := e.Svc.CreateToken(context.Background(), orchestrator.CreateTokenRequest{Username: "alice", Name: "revoke-me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.RevokeToken(context.Background(), tok.ID); err != nil {
		t.Fatal(err)
	}

	t.Run("no token", func(t *testing.T) {
		for _, path := range []string{"/api/whoami", "/api/clients", "/api/forward/a/b/api/capabilities"} {
			r := e.send(t, "GET", path, nil)
			wantError(t, r, http.StatusUnauthorized)
			ch := r.header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="berth"`) {
				t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge with realm berth", path, ch)
			}
			if strings.Contains(ch, "error=") {
				t.Errorf("%s: WWW-Authenticate %q has an error parameter though no credential was sent", path, ch)
			}
		}
	})
	for name, cred := range map[string]string{"garbage": "not-a-berth-token", "unknown": wellFormed, "revoked": revoked} {
		t.Run(name+" token", func(t *testing.T) {
			for _, opt := range []func(*http.Request){bearer(cred), sessionToken(cred)} {
				r := e.send(t, "GET", "/api/whoami", nil, opt)
				wantError(t, r, http.StatusUnauthorized)
				ch := r.header.Get("WWW-Authenticate")
				if !strings.Contains(ch, `error="invalid_token"`) {
					t.Errorf("WWW-Authenticate %q lacks error=\"invalid_token\"", ch)
				}
				if strings.Contains(string(r.body), cred) || strings.Contains(ch, cred) {
					t.Errorf("the answer echoes the credential: %s / %s", ch, r.body)
				}
			}
		})
	}
	t.Run("two different tokens", func(t *testing.T) {
		wantError(t, e.send(t, "GET", "/api/whoami", nil, bearer(e.alice), sessionToken(e.bob)), http.StatusBadRequest, auth.SessionTokenHeader)
	})
}

// Listings hold the caller's own clients and servers; a global admin
// sees everyone's.
func TestListings(t *testing.T) {
	e := newTestServer(t)
	ca := e.registerClient(t, e.alice, "alice-run")
	cb := e.registerClient(t, e.bob, "bob-run")
	sa := e.startServer(t, e.alice, ca.ID).ServerID

	ids := func(token, path string) []string {
		t.Helper()
		// A list is an object with one array: clients or servers.
		var lists map[string][]struct {
			ID string `json:"id"`
		}
		e.call(t, token, "GET", path, nil, http.StatusOK, &lists)
		if len(lists) != 1 {
			t.Fatalf("GET %s answered %d lists", path, len(lists))
		}
		var out []string
		for _, items := range lists {
			for _, it := range items {
				out = append(out, it.ID)
			}
		}
		return out
	}
	same := func(what string, got []string, want ...string) {
		t.Helper()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	same("alice's clients", ids(e.alice, "/api/clients"), ca.ID)
	same("bob's clients", ids(e.bob, "/api/clients"), cb.ID)
	same("admin's clients", ids(e.admin, "/api/clients"), ca.ID, cb.ID)
	same("alice's servers", ids(e.alice, "/api/servers"), sa)
	same("alice's servers of her client", ids(e.alice, "/api/servers?client_id="+ca.ID), sa)
	same("bob's servers", ids(e.bob, "/api/servers"))
	same("admin's servers", ids(e.admin, "/api/servers"), sa)
}
