package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// activityInterval bounds how often exec and forward calls write a
// server's last_activity_at.
const activityInterval = 30 * time.Second

// runBashParams is a run_bash_command operation's stored request; its env
// is sealed separately.
type runBashParams struct {
	Body json.RawMessage `json:"body"`
}

func (s *Service) endpoint(srv store.Server) runtime.Endpoint {
	if srv.Endpoint == nil {
		return runtime.Endpoint{}
	}
	return runtime.Endpoint{Network: srv.Endpoint.Network, Address: srv.Endpoint.Address}
}

// target is how to reach a running server's agent. A server that is not
// running answers unavailable (503), which callers may retry; one whose
// sandbox this replica cannot reach answers where to go (notHere).
func (s *Service) target(ctx context.Context, srv store.Server) (forward.Target, error) {
	if err := checkRunning(srv); err != nil {
		return forward.Target{}, err
	}
	if err := s.notHere(ctx, srv); err != nil {
		return forward.Target{}, err
	}
	return forward.Target{ServerID: srv.ID, Endpoint: s.endpoint(srv), Token: s.agentToken(srv.ID)}, nil
}

// checkExecutable refuses to schedule a command in srv unless it runs
// and a replica that can reach its sandbox is there to run it. Any
// replica schedules a command; one that can reach the sandbox runs it
// (store.ClaimOperation). Scheduled for an owner that is gone, it would
// run whenever that owner is back, so it is refused, saying so.
func (s *Service) checkExecutable(ctx context.Context, srv store.Server) error {
	if err := checkRunning(srv); err != nil {
		return err
	}
	return s.ownerGone(ctx, srv)
}

// checkRunning refuses a server that is not running as unavailable.
func checkRunning(srv store.Server) error {
	if srv.Status != ServerRunning || srv.Endpoint == nil {
		return wire.Errorf(wire.CodeUnavailable, "server %s is %s, not RUNNING; retry when it is running", srv.ID, srv.Status)
	}
	return nil
}

// callAgent sends a JSON request to the server's agent and decodes the
// JSON answer, read up to limit bytes, into out, all within call's
// deadline. An agent error keeps its code and message.
func (s *Service) callAgent(ctx context.Context, srv store.Server, call agentCall, method, path string, in, out any, limit int64) error {
	t, err := s.target(ctx, srv)
	if err != nil {
		return err
	}
	resp, raw, err := s.askAgent(ctx, t, call, method, path, in, limit)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return decodeAnswer(srv.ID, raw, out)
}

func decodeAnswer(serverID string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return wire.Errorf(wire.CodeBadGateway, "server %s answered malformed JSON: %v", serverID, err)
	}
	return nil
}

// maxErrorAnswer bounds an agent's error answer (a code and a message),
// and maxSmallAnswer one that carries no sandbox content (health, ended
// sessions).
const (
	maxErrorAnswer = 64 << 10
	maxSmallAnswer = 64 << 10
)

// askAgent sends in (JSON, when not nil) to the agent of t and returns
// its answer with the body read whole, up to limit bytes, all within
// call's deadline. The caller closes resp.Body once done with the bytes,
// which count against the answer budget until then. An answer other than
// 2xx is an error with the agent's code and message (agentError).
func (s *Service) askAgent(ctx context.Context, t forward.Target, call agentCall, method, path string, in any, limit int64) (*http.Response, []byte, error) {
	ctx, cancel := s.bound(ctx, t.ServerID, call)
	defer cancel()
	var body io.Reader
	h := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, nil, fmt.Errorf("encode request to server %s: %w", t.ServerID, err)
		}
		body = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	resp, err := s.sendAgent(ctx, t, method, path, h, body)
	if err != nil {
		return nil, nil, err
	}
	raw, err := s.readAnswer(ctx, t.ServerID, resp, limit)
	if err != nil {
		resp.Body.Close()
		return nil, nil, err
	}
	return resp, raw, nil
}

// sendAgent sends one request to the agent of t and returns a 2xx answer
// with its body unread, for the caller to stream and close. Any other
// answer is an error with the agent's code and message (agentError). ctx
// must carry the call's deadline (askAgent's, or a stream's).
func (s *Service) sendAgent(ctx context.Context, t forward.Target, method, path string, h http.Header, body io.Reader) (*http.Response, error) {
	resp, err := s.fwd.Do(ctx, t, method, path, h, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, err := s.readAnswer(ctx, t.ServerID, resp, maxErrorAnswer)
	if err != nil {
		return nil, err
	}
	return nil, agentError(t.ServerID, resp.StatusCode, raw)
}

// readAnswer reads an answer's body whole, up to limit bytes.
func (s *Service) readAnswer(ctx context.Context, serverID string, resp *http.Response, limit int64) ([]byte, error) {
	raw, err := s.fwd.ReadBody(ctx, resp, limit, serverID)
	switch {
	case err == nil:
		return raw, nil
	case errors.Is(err, forward.ErrAnswerTooLarge), forward.Cut(ctx) != nil:
		return nil, err
	default:
		return nil, wire.Errorf(wire.CodeBadGateway, "read answer of server %s: %w", serverID, err)
	}
}

// agentError turns an agent's error answer into an error with the
// agent's code and message. The agent is untrusted: a code berth does not
// know, and unauthorized (the agent refusing berth's own token, which
// says nothing about the caller's), become bad_gateway, as does an answer
// that is no wire.Error.
func agentError(serverID string, status int, raw []byte) error {
	var e wire.Error
	if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
		return wire.Errorf(wire.CodeBadGateway, "server %s answered %d: %.200q", serverID, status, raw)
	}
	switch e.Error.Code {
	case wire.CodeBadRequest, wire.CodeForbidden, wire.CodeNotFound, wire.CodeConflict, wire.CodeTooLarge,
		wire.CodeUnsupportedMedia, wire.CodeTooManyRequests, wire.CodeNotImplemented, wire.CodeUnavailable, wire.CodeInternal:
		return wire.Errorf(e.Error.Code, "%s", e.Error.Message)
	default:
		return wire.Errorf(wire.CodeBadGateway, "server %s answered %d %q: %s", serverID, status, e.Error.Code, e.Error.Message)
	}
}

// execSlot takes one of the user's concurrent exec slots, or answers 429
// naming the limit. The slot usually comes from this replica's share of
// the quota, without a round trip (see execQuota).
func (s *Service) execSlot(ctx context.Context, userID string) (func(), error) {
	release, ok, err := s.quota.acquire(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("exec quota of user %s: %w", userID, err)
	}
	if !ok {
		return nil, wire.Errorf(wire.CodeTooManyRequests, "exec quota reached: at most %d concurrent commands per user; wait for one to finish", s.cfg.MaxExecsPerUser)
	}
	return release, nil
}

// touch records activity on a server, skipping the write when the loaded
// record shows recent activity already.
func (s *Service) touch(ctx context.Context, srv store.Server) {
	if s.now().Sub(srv.LastActivityAt) < activityInterval {
		return
	}
	if err := s.store.TouchServer(ctx, srv.ID, activityInterval); err != nil {
		s.log.Warn("record server activity", "server_id", srv.ID, "err", err)
	}
}

// RunBashCommand schedules a one-shot bash command on a server
// (IdeGYM's run_bash_command). The operation's result is the agent's
// forwarded response, with the bash result JSON in its body.
func (s *Service) RunBashCommand(ctx context.Context, p rbac.Principal, req RunBashRequest) (Operation, error) {
	if err := checkWait(req.WaitSeconds); err != nil {
		return Operation{}, err
	}
	body := wire.BashRequest{
		Command: req.Command, CommandTimeout: req.CommandTimeout, GracefulTerminationTimeout: req.GracefulTerminationTimeout,
		Cwd: req.Cwd, Env: req.Env, User: req.User, StripOutput: req.StripOutput,
	}
	body.MaxOutputBytes = req.MaxOutputBytes
	// What the agent would refuse is refused here, at the call, naming
	// the field, rather than in an operation that can only fail.
	if err := body.Check(); err != nil {
		return Operation{}, err
	}
	body.Env = nil // sealed apart from the params
	srv, err := s.server(ctx, p, rbac.ActionServerExec, req.ServerID, req.ClientID)
	if err != nil {
		return Operation{}, err
	}
	if err := s.checkExecutable(ctx, srv); err != nil {
		return Operation{}, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return Operation{}, err
	}
	params, _ := json.Marshal(runBashParams{Body: raw})
	var sealed []byte
	if len(req.Env) > 0 {
		if sealed, err = s.seal(req.Env); err != nil {
			return Operation{}, fmt.Errorf("seal env: %w", err)
		}
	}
	return s.scheduleExec(ctx, p, srv, opRunBash, params, sealed, req.WaitSeconds)
}

// insertTimeout bounds recording a command, which the caller cannot
// cancel.
const insertTimeout = 30 * time.Second

// scheduleExec records an operation that runs something in srv (a
// command, a test run), audits it as an exec, and runs it, waiting up to
// waitSeconds.
func (s *Service) scheduleExec(ctx context.Context, p rbac.Principal, srv store.Server, opType string, params, sealed []byte, waitSeconds float64) (Operation, error) {
	// The operation and its audit entry are one statement: one round
	// trip, and one durable commit, which the command needs (without the
	// row a crash would lose that it ran, or let it run twice). The
	// insert is not the caller's to cancel: a request that went away
	// while it was under way could leave it committed, claimed by this
	// replica, and run by nobody until its lease ran out (then failed as
	// if the replica had died). Once asked for, the command is recorded
	// and runs, as any whose caller leaves does.
	insCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), insertTimeout)
	defer cancel()
	op, err := s.store.InsertAuditedOperation(insCtx, store.NewOperation{
		Type: opType, OwnerID: srv.OwnerID, Namespace: srv.Namespace, ServerID: srv.ID, Params: params, ParamsSealed: sealed,
		ClaimFor: s.claimFor(srv, waitSeconds), Lease: s.cfg.OperationLease,
	}, store.AuditEntry{
		ActorID: p.UserID, Actor: p.Username, TokenID: p.TokenID, Action: "server.exec",
		TargetKind: "server", TargetID: srv.ID, Namespace: srv.Namespace, Outcome: "ok", Detail: map[string]any{"kind": opType},
	})
	if err != nil {
		s.audit(ctx, p, "server.exec", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"kind": opType})
		return Operation{}, err
	}
	s.touch(ctx, srv)
	return withOperationView(s.scheduled(ctx, op, srv, waitSeconds))
}

// loadedServerKey carries, into an inline run, the server record its
// caller loaded a moment before (see withLoadedServer).
type loadedServerKey struct{}

// withLoadedServer lets an operation run on srv use that record instead
// of loading it again: the caller that scheduled the run inline has just
// read it, and a second read would only cost a round trip.
func withLoadedServer(ctx context.Context, srv store.Server) context.Context {
	return context.WithValue(ctx, loadedServerKey{}, srv)
}

// opTarget loads the server an operation runs in and how to reach it.
func (s *Service) opTarget(ctx context.Context, op store.Operation) (store.Server, forward.Target, error) {
	srv, ok := ctx.Value(loadedServerKey{}).(store.Server)
	if !ok || srv.ID != op.ServerID {
		var err error
		if srv, err = s.store.ServerByID(ctx, op.ServerID); err != nil {
			return store.Server{}, forward.Target{}, err
		}
	}
	t, err := s.target(ctx, srv)
	return srv, t, err
}

func (s *Service) execRunBash(ctx context.Context, op store.Operation) (any, error) {
	var params runBashParams
	if err := json.Unmarshal(op.Params, &params); err != nil {
		return nil, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
	}
	var body wire.BashRequest
	if err := json.Unmarshal(params.Body, &body); err != nil {
		return nil, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
	}
	if err := s.unseal(op.ParamsSealed, &body.Env); err != nil {
		return nil, fmt.Errorf("operation %s env: %w", op.ID, err)
	}
	srv, t, err := s.opTarget(ctx, op)
	if err != nil {
		return nil, takenOver(op, err)
	}
	// The agent is always told the limit, even when the caller said null.
	limit := s.outputLimit(body.MaxOutputBytes)
	body.MaxOutputBytes = wire.Int64(limit)
	release, err := s.commandSlot(ctx, op)
	if err != nil {
		return nil, err
	}
	defer release()
	execCtx, done := s.execCommand(ctx)
	began := time.Now()
	resp, raw, err := s.askCommand(execCtx, t, op, s.bashCall("the command", body), "api/tools/bash", &body, &body.Operation, outputAnswerLimit(limit))
	done(err)
	s.touch(ctx, srv)
	run := agentRun{target: t}
	if err != nil {
		// A command the agent refused is a failed operation with the
		// agent's code, never a success holding the refusal.
		return run, takenOver(op, fmt.Errorf("command on server %s: %w", srv.ID, err))
	}
	defer resp.Body.Close()
	stored, err := bashBody(srv.ID, raw, limit, func(res *wire.BashResult) {
		res.EgressRefused = s.refusedDuring(srv.ID, began, res.ExitCode != 0 || res.TimedOut)
	})
	if err != nil {
		return run, err
	}
	resp.Header.Set("Content-Length", strconv.Itoa(len(stored)))
	run.result, err = forwardedResponse(resp, stored).encode()
	return run, err
}

// commandSlot takes an exec slot for an operation's command. A takeover
// takes none: its command was let in when it was first run, and may be
// running still.
func (s *Service) commandSlot(ctx context.Context, op store.Operation) (func(), error) {
	if op.Attempts > 1 {
		return func() {}, nil
	}
	return s.execSlot(ctx, op.OwnerID)
}

// bashBody decodes an agent's answer to a bash command and returns the
// body berth stores: berth's encoding of the result, its streams fitted to
// limit (wire.FitOutput: output longer than asked for, binary output
// included, is kept truncated, never refused), and nothing else.
func bashBody(serverID string, raw []byte, limit int64, note func(*wire.BashResult)) (string, error) {
	var res wire.BashResult
	if err := decodeAnswer(serverID, raw, &res); err != nil {
		return "", err
	}
	wire.FitOutput(&res, limit)
	// Only berth says what its gateway refused: note replaces whatever
	// the agent claimed.
	note(&res)
	b, err := res.AppendJSON(nil)
	if err != nil {
		return "", fmt.Errorf("encode the result of server %s: %w", serverID, err)
	}
	return string(b), nil
}

// SessionExec runs a command in a persistent shell session of a server
// and returns the result directly (no operation).
func (s *Service) SessionExec(ctx context.Context, p rbac.Principal, serverID, session string, req wire.SessionExecRequest) (wire.BashResult, error) {
	if session == "" {
		session = "default"
	}
	if err := wire.CheckSessionID(session); err != nil {
		return wire.BashResult{}, err
	}
	if err := req.Check(); err != nil {
		return wire.BashResult{}, err
	}
	srv, err := s.server(ctx, p, rbac.ActionServerExec, serverID, "")
	if err != nil {
		return wire.BashResult{}, err
	}
	// The agent is always told the timeout, which the call's deadline
	// is derived from.
	if req.Timeout <= 0 {
		req.Timeout = wire.DefaultSessionTimeoutSeconds
	}
	// Charged to the server's owner, as run_bash_command is: the quota
	// bounds what runs in one user's sandboxes, whoever asks.
	release, err := s.execSlot(ctx, srv.OwnerID)
	if err != nil {
		return wire.BashResult{}, err
	}
	defer release()
	limit := s.outputLimit(req.MaxOutputBytes)
	req.MaxOutputBytes = wire.Int64(limit)
	var res wire.BashResult
	execCtx, done := s.execSession(ctx)
	began := time.Now()
	err = s.callAgent(execCtx, srv, s.sessionCall(req), http.MethodPost, "api/sessions/"+session+"/exec", req, &res, outputAnswerLimit(limit))
	done(err)
	if err == nil {
		wire.FitOutput(&res, limit)
		// Only berth says what its gateway refused.
		res.EgressRefused = s.refusedDuring(srv.ID, began, res.ExitCode != 0 || res.TimedOut)
	}
	s.audit(ctx, p, "server.exec", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"kind": "session", "session": session})
	if err == nil {
		s.touch(ctx, srv)
	}
	return res, err
}

// ForwardTarget authorizes forwarding a request into a server and returns
// where to send it. The REST adapter then proxies with Forwarder.
func (s *Service) ForwardTarget(ctx context.Context, p rbac.Principal, clientID, serverID, path string) (forward.Target, error) {
	// Stopping the agent is the orchestrator's job: a forwarded shutdown
	// would leave the server recorded as running with no agent.
	segments := strings.FieldsFunc(strings.ToLower(path), func(r rune) bool { return r == '/' })
	if strings.Join(segments, "/") == "api/shutdown" {
		return forward.Target{}, wire.Errorf(wire.CodeForbidden, "api/shutdown cannot be forwarded; stop the server with stop_server")
	}
	srv, err := s.server(ctx, p, rbac.ActionServerExec, serverID, clientID)
	if err != nil {
		return forward.Target{}, err
	}
	t, err := s.target(ctx, srv)
	s.audit(ctx, p, "server.forward", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"path": path})
	if err != nil {
		return forward.Target{}, err
	}
	s.touch(ctx, srv)
	return t, nil
}
