package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestLifecycle walks the README's curl flow: register a client, start a
// server, run bash one-shot and in a session, poll an operation, then
// delete the server and the client. It authenticates with
// Authorization: Bearer and with Berth-Session-Token alike.
func TestLifecycle(t *testing.T) {
	e := newTestServer(t)

	// Who am I: alice is a member of the default namespace.
	var me orchestrator.Whoami
	e.call(t, e.alice, "GET", "/api/whoami", nil, http.StatusOK, &me)
	if me.Username != "alice" || len(me.Namespaces) != 1 || me.Namespaces[0] != "default" {
		t.Fatalf("whoami: %+v, want alice in namespace default", me)
	}

	// POST /api/clients
	client := e.registerClient(t, e.alice, "readme")

	// POST /api/servers, authenticated by Berth-Session-Token this time.
	r := e.send(t, "POST", "/api/servers", map[string]any{
		"client_id": client.ID, "image_tag": "plain", "wait_seconds": waitSeconds,
	}, sessionToken(e.alice))
	if r.status != http.StatusOK {
		t.Fatalf("start server with Berth-Session-Token: %d %s", r.status, r.body)
	}
	var startOp orchestrator.Operation
	if err := json.Unmarshal(r.body, &startOp); err != nil {
		t.Fatal(err)
	}
	var started orchestrator.StartServerResult
	opResult(t, startOp, &started)
	srv := started.ServerID
	if started.ClientID != client.ID || started.Server.Status != orchestrator.ServerRunning {
		t.Fatalf("start result %+v: want a running server of client %s", started, client.ID)
	}

	// POST /api/servers/{id}/bash: the operation's result is the
	// command's result as an object (IdeGYM's tools keep their JSON
	// string; berth's REST API does not make callers decode twice).
	r = e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash",
		map[string]any{"command": "echo hello", "wait_seconds": waitSeconds}, http.StatusOK, nil)
	var rawOp map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &rawOp); err != nil {
		t.Fatal(err)
	}
	if res := rawOp["result"]; len(res) == 0 || res[0] != '{' {
		t.Fatalf("operation result is %s, want a JSON object", res)
	}
	var bashOp orchestrator.Operation
	json.Unmarshal(r.body, &bashOp)
	if bashOp.Type != "run_bash_command" || bashOp.ServerID != srv {
		t.Errorf("bash operation %+v: want type run_bash_command on server %s", bashOp, srv)
	}
	if res := bashResult(t, bashOp); res.Stdout != "hello\n" || res.ExitCode != 0 {
		t.Fatalf("echo hello: %+v", res)
	}

	// POST /api/servers/{id}/sessions/{s}/exec keeps the shell's state.
	var res wire.BashResult
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/sessions/main/exec",
		wire.SessionExecRequest{Command: "mkdir -p sub && cd sub && X=42"}, http.StatusOK, &res)
	if res.ExitCode != 0 {
		t.Fatalf("session setup: %+v", res)
	}
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/sessions/main/exec",
		wire.SessionExecRequest{Command: `echo "$X $(basename "$PWD")"`}, http.StatusOK, &res)
	if res.Stdout != "42 sub\n" {
		t.Fatalf("session kept no state: stdout %q, want %q", res.Stdout, "42 sub\n")
	}

	// Without wait_seconds the call returns at once; GET
	// /api/operations/{id}?wait_seconds=5 then waits for the result.
	var op orchestrator.Operation
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{"command": "echo later"}, http.StatusOK, &op)
	if op.ID == "" {
		t.Fatalf("bash without wait: %+v, want an operation", op)
	}
	end := time.Now().Add(deadline)
	for op.Status != orchestrator.OpSucceeded && op.Status != orchestrator.OpFailed {
		if time.Now().After(end) {
			t.Fatalf("operation %s is still %s after %s", op.ID, op.Status, deadline)
		}
		e.call(t, e.alice, "GET", "/api/operations/"+op.ID+"?wait_seconds=5", nil, http.StatusOK, &op)
	}
	if res := bashResult(t, op); res.Stdout != "later\n" {
		t.Fatalf("echo later: %+v", res)
	}

	var got orchestrator.Server
	e.call(t, e.alice, "GET", "/api/servers/"+srv, nil, http.StatusOK, &got)
	if got.Status != orchestrator.ServerRunning || got.ClientID != client.ID {
		t.Fatalf("GET server: %+v, want RUNNING in client %s", got, client.ID)
	}
	e.call(t, e.alice, "GET", "/api/servers/"+srv+"/logs?tail=5", nil, http.StatusOK, nil)

	// DELETE /api/servers/{id} stops it and removes the sandbox.
	var stopped orchestrator.Server
	e.call(t, e.alice, "DELETE", "/api/servers/"+srv, nil, http.StatusOK, &stopped)
	if stopped.Status != orchestrator.ServerStopped {
		t.Fatalf("deleted server is %s, want STOPPED", stopped.Status)
	}
	if st, err := e.Runtime.Status(context.Background(), srv); err != nil || st.State != runtime.StateGone {
		t.Fatalf("sandbox of a deleted server: %+v (err %v), want gone", st, err)
	}

	// DELETE /api/clients/{id}
	var gone orchestrator.Client
	e.call(t, e.alice, "DELETE", "/api/clients/"+client.ID, nil, http.StatusOK, &gone)
	if gone.Status != orchestrator.ClientStopped {
		t.Fatalf("deleted client is %s, want STOPPED", gone.Status)
	}
	// A stopped client takes no new servers.
	wantError(t, e.send(t, "POST", "/api/servers", map[string]any{"client_id": client.ID, "image_tag": "plain"}, bearer(e.alice)),
		http.StatusConflict, client.ID)
}

// Restart takes no body (nothing to wait for) or one with wait_seconds,
// and gives the server a fresh filesystem.
func TestRestart(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "restart")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	var op orchestrator.Operation
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{"command": "echo x > mark", "wait_seconds": waitSeconds}, http.StatusOK, &op)
	bashResult(t, op)

	// No body: the operation comes back at once; wait for it by id.
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/restart", nil, http.StatusOK, &op)
	if op.Type != "restart_server" {
		t.Fatalf("restart answered %+v, want a restart_server operation", op)
	}
	e.call(t, e.alice, "GET", fmt.Sprintf("/api/operations/%s?wait_seconds=%g", op.ID, waitSeconds), nil, http.StatusOK, &op)
	if op.Status != orchestrator.OpSucceeded {
		t.Fatalf("restart is %s (%s), want SUCCEEDED", op.Status, op.Error)
	}
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{"command": "test ! -e mark", "wait_seconds": waitSeconds}, http.StatusOK, &op)
	if res := bashResult(t, op); res.ExitCode != 0 {
		t.Fatalf("a file survived the restart: %+v", res)
	}

	// With a body, it waits.
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/restart", map[string]any{"wait_seconds": waitSeconds}, http.StatusOK, &op)
	if op.Status != orchestrator.OpSucceeded {
		t.Fatalf("restart with wait_seconds is %s (%s), want SUCCEEDED", op.Status, op.Error)
	}
}
