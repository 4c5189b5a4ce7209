package orchestrator_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

func f64(v float64) *float64 { return &v }

// TestExecRequestsCheckedAtTheCall: what the agent would refuse, berth
// refuses at the call with a 400 naming the field, for one-shot and
// session commands alike.
func TestExecRequestsCheckedAtTheCall(t *testing.T) {
	r := newRunning(t, orchestrator.Config{})
	e, alice, srv := r.e, r.alice, r.server
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		req   orchestrator.RunBashRequest
		field string
	}{
		{"empty command", orchestrator.RunBashRequest{Command: "  "}, "command"},
		{"negative timeout", orchestrator.RunBashRequest{CommandTimeout: f64(-5)}, "command_timeout"},
		{"zero timeout", orchestrator.RunBashRequest{CommandTimeout: f64(0)}, "command_timeout"},
		{"NaN timeout", orchestrator.RunBashRequest{CommandTimeout: f64(math.NaN())}, "command_timeout"},
		{"negative grace", orchestrator.RunBashRequest{GracefulTerminationTimeout: f64(-1)}, "graceful_termination_timeout"},
		{"negative output limit", orchestrator.RunBashRequest{MaxOutputBytes: wire.Int64(-1)}, "max_output_bytes"},
		{"NUL in cwd", orchestrator.RunBashRequest{Cwd: "a\x00b"}, "cwd"},
		{"endless cwd", orchestrator.RunBashRequest{Cwd: strings.Repeat("d/", 3000)}, "cwd"},
		{"bad env name", orchestrator.RunBashRequest{Env: map[string]string{"1X": "v"}}, "env"},
		{"NUL in env value", orchestrator.RunBashRequest{Env: map[string]string{"X": "a\x00b"}}, "X"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.ServerID, req.WaitSeconds = srv, deadline.Seconds()
			if req.Command == "" {
				req.Command = "true"
			}
			op, err := e.Svc.RunBashCommand(ctx, alice, req)
			wantCode(t, err, wire.CodeBadRequest, tc.field)
			if op.ID != "" {
				t.Errorf("a refused command was scheduled as %s", op.ID)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		req   wire.SessionExecRequest
		field string
	}{
		{"empty command", wire.SessionExecRequest{}, "command"},
		{"NUL in command", wire.SessionExecRequest{Command: "echo \x00"}, "NUL"},
		{"negative timeout", wire.SessionExecRequest{Command: "true", Timeout: -1}, "timeout"},
		{"negative output limit", wire.SessionExecRequest{Command: "true", MaxOutputBytes: wire.Int64(-1)}, "max_output_bytes"},
	} {
		t.Run("session "+tc.name, func(t *testing.T) {
			_, err := e.Svc.SessionExec(ctx, alice, srv, "s", tc.req)
			wantCode(t, err, wire.CodeBadRequest, tc.field)
		})
	}
}

// TestRefusedCommandFails: a command the agent refuses is a FAILED
// operation with the agent's code and message, never SUCCEEDED with the
// refusal inside its result; so is one the sandbox answers with nonsense.
func TestRefusedCommandFails(t *testing.T) {
	// Only the sandbox knows its directories: the real agent refuses.
	r := newRunning(t, orchestrator.Config{})
	wantFailed(t, r.runBash(t, orchestrator.RunBashRequest{Cwd: "no-such-dir"}), wire.CodeBadRequest, "no-such-dir", r.server)

	// A sandbox answering for its agent: its error codes are kept when
	// berth knows them, anything else is the sandbox's fault.
	h := newHostile(t, orchestrator.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.BashRequest
		json.NewDecoder(r.Body).Decode(&req)
		switch req.Command {
		case "internal":
			wire.WriteError(w, wire.Errorf(wire.CodeInternal, "bash would not start"))
		case "unauthorized":
			wire.WriteError(w, wire.Errorf(wire.CodeUnauthorized, "who are you"))
		case "made-up":
			wire.WriteJSON(w, http.StatusTeapot, wire.Error{Error: wire.ErrorDetail{Code: "evil", Message: "made up"}})
		case "garbage":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte("<html>no</html>"))
		}
	}))
	for _, tc := range []struct{ command, code, word string }{
		{"internal", wire.CodeInternal, "bash would not start"},
		{"unauthorized", wire.CodeBadGateway, "who are you"},
		{"made-up", wire.CodeBadGateway, "made up"},
		{"garbage", wire.CodeBadGateway, "400"},
	} {
		wantFailed(t, h.runBash(t, orchestrator.RunBashRequest{Command: tc.command}), tc.code, tc.word, h.server)
	}
}

// wantFailed fails the test unless op failed with code and an error that
// names every one of words.
func wantFailed(t *testing.T, op orchestrator.Operation, code string, words ...string) {
	t.Helper()
	if op.Status != orchestrator.OpFailed || op.ErrorCode != code || op.Result != nil {
		t.Fatalf("operation %s is %s (code %q, error %q, result %v), want FAILED with %s and no result", op.ID, op.Status, op.ErrorCode, op.Error, op.Result != nil, code)
	}
	for _, w := range words {
		if !strings.Contains(op.Error, w) {
			t.Errorf("error %q does not name %q", op.Error, w)
		}
	}
}
