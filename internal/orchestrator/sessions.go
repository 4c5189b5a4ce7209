package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Shell sessions are cli-mcp-server's one-tool flow: the caller names a
// session (its X-Session-ID) and runs bash; berth finds the sandbox it
// started for that user and session, or starts one, and runs the command
// in that sandbox's persistent shell. The mapping is a row of
// shell_sessions, so every replica routes a session to the same server,
// and two first calls for one session (on any replicas) meet on the
// row's transaction lock and end with one sandbox.

// SessionBashRequest is the input of bash without a server: the command,
// and the session that picks the sandbox.
type SessionBashRequest struct {
	Session string `json:"session" jsonschema:"the session (RFC 1123 label: lower-case letters, digits and inner '-', at most 63), e.g. the X-Session-ID header; calls with the same session share one sandbox, its shell and /workspace"`
	wire.SessionExecRequest
	// Network applies only when this call starts the session's sandbox.
	Network *egress.Policy `json:"network,omitempty" jsonschema:"the network policy of the session's sandbox when this call starts it (default: the operator's); set_server_network changes it later"`
}

// SessionBashResult is the answer of bash without a server: the
// command's result and where it ran.
type SessionBashResult struct {
	wire.BashResult
	Session  string `json:"session" jsonschema:"the session the command ran in"`
	ServerID string `json:"server_id" jsonschema:"the sandbox server of the session; the server tools (read_file, forward_request, ...) take it"`
	ClientID string `json:"client_id,omitempty" jsonschema:"the client berth registered for the session"`
	Started  bool   `json:"started,omitempty" jsonschema:"true when this call started the session's sandbox (a new shell and /workspace)"`
}

// EndSessionResult is the answer of ending a session.
type EndSessionResult struct {
	Session  string `json:"session" jsonschema:"the session that ended"`
	ServerID string `json:"server_id" jsonschema:"the sandbox server that was stopped"`
	ClientID string `json:"client_id" jsonschema:"the client berth had registered for the session, now stopped"`
}

// sessionActions are what starting a session's sandbox takes in its
// namespace: a client, a server in it, and running commands there.
var sessionActions = []rbac.Action{rbac.ActionClientCreate, rbac.ActionServerCreate, rbac.ActionServerExec}

// checkSessionKey refuses session keys that are not RFC 1123 labels:
// they name a shell in the sandbox and must be safe in every runtime.
func checkSessionKey(key string) error {
	if !namespaceRE.MatchString(key) {
		return wire.Errorf(wire.CodeBadRequest, "session %.80q: want an RFC 1123 label (lower-case letters, digits and inner '-', 1 to 63 characters)", key)
	}
	return nil
}

// Bash runs a command in a persistent shell: with serverID in that
// server's shell named session (default "default"), without it in the
// caller's sandbox for session, started on the first call (SessionBash).
// The answer says where it ran either way.
func (s *Service) Bash(ctx context.Context, p rbac.Principal, serverID string, req SessionBashRequest) (SessionBashResult, error) {
	if serverID != "" {
		if req.Network != nil {
			return SessionBashResult{}, wire.Errorf(wire.CodeBadRequest, "network applies to the sandbox a session starts, not to server %s: change its policy with set_server_network", serverID)
		}
		session := cmp.Or(req.Session, "default")
		res, err := s.SessionExec(ctx, p, serverID, session, req.SessionExecRequest)
		return SessionBashResult{BashResult: res, Session: session, ServerID: serverID}, err
	}
	if req.Session == "" {
		return SessionBashResult{}, wire.Errorf(wire.CodeBadRequest,
			"bash needs server_id, or a session (the session argument or the X-Session-ID header) to run in your sandbox for it")
	}
	return s.SessionBash(ctx, p, req)
}

// SessionBash runs a command in the persistent shell of the caller's
// sandbox for the session, starting that sandbox (from the warm pool when
// it has one) when the session has none or its server is gone.
func (s *Service) SessionBash(ctx context.Context, p rbac.Principal, req SessionBashRequest) (SessionBashResult, error) {
	if err := checkSessionKey(req.Session); err != nil {
		return SessionBashResult{}, err
	}
	// A command that would be refused must not start a sandbox first.
	if err := req.SessionExecRequest.Check(); err != nil {
		return SessionBashResult{}, err
	}
	if err := requireScope(p, rbac.ActionServerExec); err != nil {
		return SessionBashResult{}, err
	}
	if _, err := s.checkNetwork(req.Network); err != nil {
		return SessionBashResult{}, err
	}
	ss, srv, startedNow, err := s.sessionServer(ctx, p, req.Session, req.Network)
	if err != nil {
		return SessionBashResult{}, err
	}
	res, err := s.SessionExec(ctx, p, srv.ID, req.Session, req.SessionExecRequest)
	if err != nil {
		return SessionBashResult{}, fmt.Errorf("session %s: %w", req.Session, err)
	}
	return SessionBashResult{BashResult: res, Session: req.Session, ServerID: srv.ID, ClientID: ss.ClientID, Started: startedNow}, nil
}

// sessionServer returns the session's running server, starting one when
// the session has none that is live, and whether this call started it.
func (s *Service) sessionServer(ctx context.Context, p rbac.Principal, key string, network *egress.Policy) (store.ShellSession, store.Server, bool, error) {
	ss, err := s.store.ShellSession(ctx, p.UserID, key)
	switch {
	case err == nil:
		srv, live, err := s.sessionLive(ctx, ss)
		if err != nil {
			return ss, store.Server{}, false, err
		}
		if live {
			srv, err = s.sessionReady(ctx, ss, srv, nil)
			return ss, srv, false, err
		}
	case !errors.Is(err, store.ErrNotFound):
		return ss, store.Server{}, false, err
	}
	ss, srv, op, err := s.openSession(ctx, p, key, network)
	if err != nil {
		return ss, store.Server{}, false, err
	}
	srv, err = s.sessionReady(ctx, ss, srv, op)
	return ss, srv, op != nil, err
}

// sessionLive loads the session's server and reports whether it is live
// (starting or running). A finished one runs again: its sandbox is still
// there with the session's files.
func (s *Service) sessionLive(ctx context.Context, ss store.ShellSession) (store.Server, bool, error) {
	srv, err := s.store.ServerByID(ctx, ss.ServerID)
	if err != nil {
		return srv, false, fmt.Errorf("session %s: %w", ss.Key, err)
	}
	if srv.Status == ServerFinished {
		revived, err := s.store.SetServerStatus(ctx, srv.ID, ServerRunning, "", ServerFinished)
		if err == nil {
			srv = revived
			s.reviveClient(ctx, ss.ClientID)
		} else if !errors.Is(err, store.ErrConflict) {
			return srv, false, fmt.Errorf("session %s: %w", ss.Key, err)
		}
	}
	return srv, srv.Status == ServerStarting || srv.Status == ServerRunning, nil
}

// reviveClient makes a finished client alive again, as a start in it
// does.
func (s *Service) reviveClient(ctx context.Context, id string) {
	c, err := s.store.ClientByID(ctx, id)
	if err == nil && c.Status == ClientFinished {
		_, err = s.store.SetClientStatus(ctx, id, ClientAlive)
	}
	if err != nil {
		s.log.Warn("revive finished client", "client_id", id, "err", err)
	}
}

// openSession gives the session a new server, or, when another call gave
// it one first, returns that one. The new server's start is returned
// (nil when the server is another call's); it is claimed by this replica
// to run here at once.
func (s *Service) openSession(ctx context.Context, p rbac.Principal, key string, network *egress.Policy) (store.ShellSession, store.Server, *store.Operation, error) {
	ns, err := s.sessionNamespace(ctx, p)
	if err != nil {
		return store.ShellSession{}, store.Server{}, nil, err
	}
	req := StartServerRequest{ImageTag: s.cfg.SessionImage, ServerName: "session-" + key, WaitSeconds: s.sessionWait().Seconds(), Network: network}
	plan, err := s.checkStart(&req)
	if err != nil {
		return store.ShellSession{}, store.Server{}, nil, fmt.Errorf("session image: %w", err)
	}
	if err := s.prepareStart(ctx, &plan, &req, ns); err != nil {
		return store.ShellSession{}, store.Server{}, nil, err
	}
	var (
		ss    store.ShellSession
		c     store.Client
		st    started
		mine  bool
		other store.Server
	)
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		mine = false
		cur, found, err := store.LockedShellSession(ctx, tx, p.UserID, key)
		if err != nil {
			return err
		}
		if found {
			// Another call may have started one while this one waited
			// for the lock.
			srv, live, err := s.sessionLive(ctx, cur)
			if err != nil {
				return err
			}
			if live {
				ss, other = cur, srv
				return nil
			}
			// The session's client stays while it is alive: its server
			// failed or was stopped, not the session.
			if c, err = s.store.ClientByID(ctx, cur.ClientID); err != nil {
				return err
			}
		}
		if !found || c.Status == ClientStopped || c.Namespace != ns {
			if c, err = store.InsertClient(ctx, tx, p.UserID, "session "+key, ns); err != nil {
				return err
			}
		}
		if st, err = s.startInTx(ctx, tx, p, req, plan, c); err != nil {
			return err
		}
		ss, err = store.PutShellSession(ctx, tx, store.ShellSession{OwnerID: p.UserID, Key: key, ClientID: c.ID,
			ServerID: st.op.ServerID, OperationID: st.op.ID})
		mine = err == nil
		return err
	})
	if err == nil && !mine {
		return ss, other, nil, nil
	}
	if err := s.afterStart(ctx, p, req, plan, c, st, err); err != nil {
		return ss, store.Server{}, nil, fmt.Errorf("session %s: start its sandbox: %w", key, err)
	}
	s.audit(ctx, p, "session.start", "server", st.op.ServerID, ns, "ok",
		map[string]any{"session": key, "client_id": c.ID, "operation_id": st.op.ID, "warm": st.tookWarm})
	srv, err := s.store.ServerByID(ctx, st.op.ServerID)
	return ss, srv, &st.op, err
}

// sessionNamespace picks where a user's session sandboxes go: the default
// namespace when the user may start and use sandboxes there, else the
// first other namespace of their role bindings where they may. Neither is
// the refusal for the default namespace.
func (s *Service) sessionNamespace(ctx context.Context, p rbac.Principal) (string, error) {
	var others []string
	for _, b := range p.Bindings {
		if b.Namespace != "" && b.Namespace != s.cfg.DefaultNamespace {
			others = append(others, b.Namespace)
		}
	}
	slices.Sort(others)
	for _, ns := range append([]string{s.cfg.DefaultNamespace}, others...) {
		if mayStartSession(p, ns) {
			return ns, nil
		}
	}
	for _, a := range sessionActions {
		if err := s.authorize(ctx, p, a, rbac.Resource{Kind: "server", Namespace: s.cfg.DefaultNamespace}, ""); err != nil {
			return "", err
		}
	}
	return s.cfg.DefaultNamespace, nil
}

func mayStartSession(p rbac.Principal, ns string) bool {
	for _, a := range sessionActions {
		if rbac.Authorize(p, a, rbac.Resource{Kind: "server", Namespace: ns}) != nil {
			return false
		}
	}
	return true
}

// sessionWait bounds how long a call waits for its session's sandbox to
// start: a start waits ReadyTimeout for the agent, after creating the
// sandbox.
func (s *Service) sessionWait() time.Duration {
	return min(s.cfg.ReadyTimeout+30*time.Second, maxWaitSeconds*time.Second)
}

// sessionReady waits until the session's server runs and returns it. op
// is its start when this call scheduled it (and so runs it); otherwise
// the call waits for the session's recorded start.
func (s *Service) sessionReady(ctx context.Context, ss store.ShellSession, srv store.Server, op *store.Operation) (store.Server, error) {
	if srv.Status == ServerRunning {
		return srv, nil
	}
	var done store.Operation
	var err error
	switch {
	case op != nil:
		done, err = s.scheduled(ctx, *op, store.Server{}, s.sessionWait().Seconds())
	case ss.OperationID != "":
		if done, err = s.store.OperationByID(ctx, ss.OperationID); err == nil {
			done, err = s.waitOperation(ctx, done, s.sessionWait().Seconds())
		}
	}
	if err != nil {
		return store.Server{}, fmt.Errorf("session %s: wait for its sandbox: %w", ss.Key, err)
	}
	if srv, err = s.store.ServerByID(ctx, ss.ServerID); err != nil {
		return store.Server{}, fmt.Errorf("session %s: %w", ss.Key, err)
	}
	switch {
	case srv.Status == ServerRunning:
		return srv, nil
	case done.Status == OpFailed:
		code := done.ErrorCode
		if code == "" {
			code = wire.CodeUnavailable
		}
		return store.Server{}, wire.Errorf(code, "session %s: its sandbox (server %s) did not start: %s; the next call starts a new one", ss.Key, srv.ID, done.Error)
	case srv.Status == ServerStarting:
		return store.Server{}, wire.Errorf(wire.CodeUnavailable, "session %s: its sandbox (server %s) is still starting; call again", ss.Key, srv.ID)
	default:
		return store.Server{}, wire.Errorf(wire.CodeUnavailable, "session %s: its sandbox (server %s) is %s; the next call starts a new one", ss.Key, srv.ID, srv.Status)
	}
}

// EndSession ends the caller's session: its sandbox and the client berth
// registered for it are stopped and the session is forgotten, so a later
// call with the same key starts afresh.
func (s *Service) EndSession(ctx context.Context, p rbac.Principal, key string) (EndSessionResult, error) {
	if err := checkSessionKey(key); err != nil {
		return EndSessionResult{}, err
	}
	if err := requireScope(p, rbac.ActionClientDelete); err != nil {
		return EndSessionResult{}, err
	}
	ss, err := s.store.ShellSession(ctx, p.UserID, key)
	if err != nil {
		return EndSessionResult{}, err
	}
	// Stopped first, forgotten after: a failed stop leaves the session
	// for the caller to end again rather than a sandbox nobody names.
	c, err := s.StopClient(ctx, p, ss.ClientID)
	if err != nil {
		return EndSessionResult{}, fmt.Errorf("end session %s: %w", key, err)
	}
	// A call that gave the session a new server meanwhile keeps it.
	if _, err := s.store.DeleteShellSession(ctx, p.UserID, key, ss.ServerID); err != nil {
		return EndSessionResult{}, fmt.Errorf("end session %s: %w", key, err)
	}
	s.audit(ctx, p, "session.end", "server", ss.ServerID, c.Namespace, "ok", map[string]any{"session": key, "client_id": ss.ClientID})
	return EndSessionResult{Session: key, ServerID: ss.ServerID, ClientID: ss.ClientID}, nil
}

// forgetSession forgets the session whose server the watcher stopped, and
// stops the client berth registered for it when nothing else of that
// client lives, so the session's next call starts afresh.
func (s *Service) forgetSession(ctx context.Context, serverID string) error {
	ss, ok, err := s.store.ShellSessionOfServer(ctx, serverID)
	if err != nil || !ok {
		return err
	}
	if _, err := s.store.DeleteShellSession(ctx, ss.OwnerID, ss.Key, serverID); err != nil {
		return err
	}
	// The user may have started more servers in the session's client.
	// The reaped one is STOPPING until a replica that can act on it has
	// deleted its sandbox: it does not count.
	live, err := s.store.ListServers(ctx, store.ServerFilter{ClientID: ss.ClientID,
		Statuses: []string{ServerStarting, ServerRunning, ServerFinished, ServerStopping}})
	if err != nil {
		return fmt.Errorf("session %s: %w", ss.Key, err)
	}
	live = slices.DeleteFunc(live, func(srv store.Server) bool { return srv.ID == serverID })
	if len(live) == 0 {
		if _, err := s.store.SetClientStatus(ctx, ss.ClientID, ClientStopped); err != nil {
			return fmt.Errorf("session %s: stop its client: %w", ss.Key, err)
		}
	}
	s.log.Info("forgot the session of a reaped server", "session", ss.Key, "server_id", serverID)
	return nil
}

// AppendJSON encodes the result with BashResult's fast encoder and its
// own fields after. Without it the BashResult's method, promoted, would
// encode only the command's result and drop where it ran.
func (r SessionBashResult) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b, err := r.BashResult.AppendJSON(b)
	if err != nil {
		return b, err
	}
	if len(b) == start || b[len(b)-1] != '}' {
		return b, fmt.Errorf("encode session result: unexpected bash result encoding")
	}
	where, err := json.Marshal(struct {
		Session  string `json:"session"`
		ServerID string `json:"server_id"`
		ClientID string `json:"client_id,omitempty"`
		Started  bool   `json:"started,omitempty"`
	}{r.Session, r.ServerID, r.ClientID, r.Started})
	if err != nil {
		return b, err
	}
	b = append(b[:len(b)-1], ',')
	return append(b, where[1:]...), nil
}
