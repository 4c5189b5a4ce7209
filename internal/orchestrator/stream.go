package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// StreamBashRequest is a one-shot command whose output is streamed as it
// is written: run_bash_command's fields, without an operation to wait on.
type StreamBashRequest struct {
	ClientID                   string             `json:"client_id,omitempty"`
	ServerID                   string             `json:"server_id"`
	Command                    string             `json:"command"`
	CommandTimeout             *float64           `json:"command_timeout,omitempty"`
	GracefulTerminationTimeout *float64           `json:"graceful_termination_timeout,omitempty"`
	MaxOutputBytes             wire.OptionalInt64 `json:"max_output_bytes,omitzero"`
	Cwd                        string             `json:"cwd,omitempty"`
	Env                        map[string]string  `json:"env,omitempty"`
	User                       string             `json:"user,omitempty"`
}

// StreamBash runs a one-shot command on a server and hands its output to
// emit as the agent sends it, then returns the final event (exit code,
// timeout, what was omitted). It is authorized, charged an exec slot,
// bounded by the command's deadline and audited as run_bash_command and
// a session exec are; nothing of it is kept in the database, so a caller
// that goes away ends the command. An error after events were emitted
// ends the stream early; emit's own error is returned as it is.
func (s *Service) StreamBash(ctx context.Context, p rbac.Principal, req StreamBashRequest, emit func(wire.ExecEvent) error) (wire.ExecEvent, error) {
	body := wire.BashRequest{
		Command: req.Command, CommandTimeout: req.CommandTimeout, GracefulTerminationTimeout: req.GracefulTerminationTimeout,
		Cwd: req.Cwd, Env: req.Env, User: req.User, MaxOutputBytes: req.MaxOutputBytes,
	}
	if err := body.Check(); err != nil {
		return wire.ExecEvent{}, err
	}
	srv, err := s.server(ctx, p, rbac.ActionServerExec, req.ServerID, req.ClientID)
	if err != nil {
		return wire.ExecEvent{}, err
	}
	if err := s.checkExecutable(ctx, srv); err != nil {
		return wire.ExecEvent{}, err
	}
	// Charged to the server's owner, as every command is.
	release, err := s.execSlot(ctx, srv.OwnerID)
	if err != nil {
		return wire.ExecEvent{}, err
	}
	defer release()
	limit := s.outputLimit(body.MaxOutputBytes)
	body.MaxOutputBytes = wire.Int64(limit)

	execCtx, done := s.execCommand(ctx)
	began := time.Now()
	end, err := s.streamFromAgent(execCtx, srv, body, limit, emit)
	done(err)
	// Only berth says what its gateway refused.
	end.EgressRefused = nil
	if err == nil && end.ExitCode != nil {
		end.EgressRefused = s.refusedDuring(srv.ID, began, *end.ExitCode != 0 || end.TimedOut)
	}
	// A caller that hung up is a usual end of a stream: the command ran,
	// and is recorded all the same.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
	defer cancel()
	s.audit(recCtx, p, "server.exec", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"kind": "stream"})
	s.touch(recCtx, srv)
	return end, err
}

// streamFromAgent asks srv's agent to run body as a stream and passes its
// events on. The agent is untrusted: each stream may carry at most what
// its limit allows (head, marker and tail), each line is bounded, and an
// event that is neither output nor the end breaks the stream.
func (s *Service) streamFromAgent(ctx context.Context, srv store.Server, body wire.BashRequest, limit int64, emit func(wire.ExecEvent) error) (wire.ExecEvent, error) {
	serverID := srv.ID
	t, err := s.target(ctx, srv)
	if err != nil {
		return wire.ExecEvent{}, err
	}
	ctx, cancel := s.bound(ctx, serverID, s.bashCall("the streamed command", body))
	defer cancel()
	raw, err := json.Marshal(body)
	if err != nil {
		return wire.ExecEvent{}, fmt.Errorf("encode request to server %s: %w", serverID, err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {wire.NDJSONType}}
	resp, err := s.sendAgent(ctx, t, http.MethodPost, "api/tools/bash/stream", h, bytes.NewReader(raw))
	if err != nil && wire.DetailOf(err).Code == wire.CodeNotFound {
		// Only an agent older than the route answers not_found here; the
		// caller must not read it as "no such server".
		return wire.ExecEvent{}, wire.Errorf(wire.CodeNotImplemented, "the agent of server %s cannot stream commands (it predates streamed exec): restart the server to update it, or use run_bash_command", serverID)
	}
	if err != nil {
		return wire.ExecEvent{}, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, wire.NDJSONType) {
		return wire.ExecEvent{}, wire.Errorf(wire.CodeBadGateway, "server %s answered a stream as %.60q, not %s", serverID, ct, wire.NDJSONType)
	}
	perStream := limit + markerSlack
	var sent [2]int64
	end, err := wire.ReadEvents(resp.Body, int(outputAnswerLimit(limit)), func(ev wire.ExecEvent) error {
		i := 0
		if ev.Stream == wire.StreamStderr {
			i = 1
		}
		sent[i] += int64(len(ev.Data))
		if ev.Data == "" {
			// Empty pieces would let a sandbox send events for nothing
			// until the deadline.
			return wire.Errorf(wire.CodeBadGateway, "server %s streamed an empty piece of %s", serverID, ev.Stream)
		}
		if sent[i] > perStream {
			return wire.Errorf(wire.CodeBadGateway, "server %s streamed more %s than its limit of %d bytes", serverID, ev.Stream, limit)
		}
		if err := emit(ev); err != nil {
			return &emitError{err}
		}
		return nil
	})
	var ee *emitError
	switch {
	case errors.As(err, &ee):
		return wire.ExecEvent{}, ee.err
	case err != nil && forward.Cut(ctx) != nil:
		return wire.ExecEvent{}, forward.Cut(ctx)
	case err != nil && wire.DetailOf(err).Code == wire.CodeBadGateway:
		return wire.ExecEvent{}, err
	case err != nil:
		return wire.ExecEvent{}, wire.Errorf(wire.CodeBadGateway, "stream of server %s: %w", serverID, err)
	case end.Error != nil:
		msg, _ := json.Marshal(wire.Error{Error: *end.Error})
		return wire.ExecEvent{}, agentError(serverID, http.StatusOK, msg)
	}
	end.Truncated = end.StdoutTruncatedBytes > 0 || end.StderrTruncatedBytes > 0
	end.Stream, end.Data = "", ""
	return end, nil
}

// emitError marks the caller's own failure to take an event (it went
// away), which is no fault of the server's.
type emitError struct{ err error }

func (e *emitError) Error() string { return e.err.Error() }
