package orchestrator

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// A command (run_bash_command, run_tests) survives the replica running
// it. berth sends it to the agent under its operation id (wire.Operation);
// the agent runs it apart from the request and keeps its answer until
// berth releases it. A replica that takes the operation over when the
// lease ends sends the same request again, with the operation's age: the
// agent answers with the outcome of its one run, waiting while it runs,
// and an agent that cannot know whether it ran it (it restarted, or let
// go of unreleased answers since) says so instead of running it again.
// Once the outcome is recorded, the agent's copy is released off the
// caller's path; a cancelled operation's release ends its command.

// takeoverAgeMargin is added to the age a takeover states: the time from
// the claim to the agent's check, and rounding, must never make an agent
// that restarted since look as if it had been up all along.
const takeoverAgeMargin = 2 * time.Second

// releaseTimeout bounds one release sent to an agent.
const releaseTimeout = 10 * time.Second

// Releases queued past releaseQueue are dropped (the agent lets go of
// the answer after its TTL); releaseWorkers send them.
const (
	releaseQueue   = 1024
	releaseWorkers = 2
)

// operationRef ties an agent request to op. A takeover states the
// operation's age: from when the database recorded it to when it gave
// this replica the claim, both by the database's clock.
func operationRef(op store.Operation) wire.Operation {
	ref := wire.Operation{OperationID: op.ID}
	if op.Attempts > 1 {
		ref.OperationAgeMS = (op.UpdatedAt.Sub(op.CreatedAt) + takeoverAgeMargin).Milliseconds()
	}
	return ref
}

// askCommand sends an operation's command to the agent of t: body, which
// holds ref. An agent older than operation ids (a sandbox started before
// berth was upgraded) refuses the field; on a first attempt it gets the
// request again without it, its command then ending with the request as
// it always did, so that such sandboxes keep working. A takeover never
// does: that would run the command a second time.
func (s *Service) askCommand(ctx context.Context, t forward.Target, op store.Operation, call agentCall, path string, body any, ref *wire.Operation, limit int64) (*http.Response, []byte, error) {
	*ref = operationRef(op)
	resp, raw, err := s.askAgent(ctx, t, call, http.MethodPost, path, body, limit)
	if err != nil && op.Attempts == 1 && predatesOperations(err) {
		*ref = wire.Operation{}
		return s.askAgent(ctx, t, call, http.MethodPost, path, body, limit)
	}
	return resp, raw, err
}

// predatesOperations tells an agent's refusal of the operation fields.
func predatesOperations(err error) bool {
	d := wire.DetailOf(err)
	return d.Code == wire.CodeBadRequest && strings.Contains(d.Message, `unknown field "operation_id"`)
}

// takenOver explains err, an error of a command this replica took over
// from one that stopped; other errors it returns as they are.
func takenOver(op store.Operation, err error) error {
	if err == nil || op.Attempts <= 1 {
		return err
	}
	const stopped = "the replica running this command stopped before it recorded how the command ended"
	if predatesOperations(err) {
		return wire.Errorf(wire.CodeConflict, "%s, and the server's agent is older than commands that survive their replica (restart the server to update it): whether the command ran, and how it ended, are unknown: check the server's state and run it again if that is safe", stopped)
	}
	switch d := wire.DetailOf(err); d.Code {
	case wire.CodeBadGateway, wire.CodeGatewayTimeout, wire.CodeUnavailable, wire.CodeInternal:
		// Not an answer of the agent about the command: nothing was
		// learnt of it.
		return wire.Errorf(d.Code, "%s, and this replica could not learn it: %w; whether the command ran, and how it ended, are unknown: check the server's state and run it again if that is safe", stopped, err)
	default:
		return wire.Errorf(d.Code, "%s; taken over: %w", stopped, err)
	}
}

// agentRun is what running a command returns to runOperation: the
// operation's result, and the agent that keeps the answer until berth
// releases it.
type agentRun struct {
	result any
	target forward.Target
}

// afterRun releases the agent's copy of an operation's answer once this
// replica recorded the outcome, or stops the command when the operation
// was cancelled while it ran (the replica that cancelled it may not reach
// the agent). When another replica took the operation over, its answer
// is that replica's to collect.
func (s *Service) afterRun(ctx context.Context, op store.Operation, run agentRun, recorded bool) {
	if recorded {
		select {
		case s.releases <- pendingRelease{run.target, op.ID}:
		default:
			s.log.Debug("release queue full; the agent lets go of the answer after its TTL", "operation_id", op.ID)
		}
		return
	}
	cur, err := s.store.OperationByID(context.WithoutCancel(ctx), op.ID)
	if err == nil && cur.Status == OpCancelled {
		s.releaseRun(context.WithoutCancel(ctx), run.target, op.ID)
	}
}

// pendingRelease is a release waiting for a worker.
type pendingRelease struct {
	target forward.Target
	id     string
}

// sendReleases sends queued releases until ctx ends.
func (s *Service) sendReleases(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-s.releases:
			s.releaseRun(ctx, r.target, r.id)
		}
	}
}

// releaseRun tells the agent of t that berth is done with operation id:
// it lets go of the answer, and ends the command if it still runs.
func (s *Service) releaseRun(ctx context.Context, t forward.Target, id string) {
	ctx, cancel := s.bound(ctx, t.ServerID, agentCall{what: "the release of a command's answer", timeout: releaseTimeout})
	defer cancel()
	resp, err := s.sendAgent(ctx, t, http.MethodDelete, "api/operations/"+id, nil, nil)
	if err != nil {
		s.log.Warn("release a command's answer on its agent; the agent lets go of it after its TTL", "operation_id", id, "server_id", t.ServerID, "err", err)
		return
	}
	resp.Body.Close()
}

// stopRun ends the command of a cancelled operation on its agent, as far
// as this replica reaches it.
func (s *Service) stopRun(ctx context.Context, op store.Operation) {
	if op.ServerID == "" || (op.Type != opRunBash && op.Type != opRunTests) {
		return
	}
	srv, err := s.store.ServerByID(ctx, op.ServerID)
	if err != nil {
		s.log.Warn("stop a cancelled command: load its server", "operation_id", op.ID, "err", err)
		return
	}
	t, err := s.target(ctx, srv)
	if err != nil {
		return // no agent runs it any more, or not one this replica reaches
	}
	s.releaseRun(ctx, t, op.ID)
}
