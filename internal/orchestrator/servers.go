package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Operation types.
const (
	opStartServer   = "start_server"
	opWarmServer    = "warm_server"
	opRestartServer = "restart_server"
	opRunBash       = "run_bash_command"
)

// startParams are a start_server operation's parameters.
type startParams struct {
	// Mode is how the server is obtained: new, warm, reset or restart.
	Mode     string `json:"mode"`
	ClientID string `json:"client_id"`
}

const maxWaitSeconds = 300

func checkWait(w float64) error {
	if w < 0 || w > maxWaitSeconds {
		return wire.Errorf(wire.CodeBadRequest, "wait_seconds: want 0 to %d, got %g", maxWaitSeconds, w)
	}
	return nil
}

func checkEnv(env map[string]string) ([]string, error) {
	if err := wire.CheckEnv(env); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(env)), nil
}

// checkResources refuses resources that are not positive Kubernetes
// quantities, naming the field.
func checkResources(res *store.Resources) error {
	if res == nil {
		return nil
	}
	for _, f := range []struct{ name, value, example string }{
		{"resources.cpu", res.CPU, "500m or 2"}, {"resources.memory", res.Memory, "512Mi or 2Gi"},
	} {
		if f.value == "" {
			continue
		}
		if q, err := resource.ParseQuantity(f.value); err != nil || q.Sign() <= 0 {
			return wire.Errorf(wire.CodeBadRequest, "%s %q: want a positive quantity such as %s", f.name, f.value, f.example)
		}
	}
	return nil
}

func serverResource(srv store.Server) rbac.Resource {
	return rbac.Resource{Kind: "server", Namespace: srv.Namespace, OwnerID: srv.OwnerID}
}

// reuseKey identifies servers that may stand in for each other: same name,
// image and runtime options.
func reuseKey(name, image, runtimeClass string, res store.Resources) string {
	b, _ := json.Marshal([]any{name, image, runtimeClass, res})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// StartServer schedules the start of a server for one of the caller's
// clients and returns the operation; with WaitSeconds it waits for the
// operation to finish (up to that long) and returns it as it then is.
func (s *Service) StartServer(ctx context.Context, p rbac.Principal, req StartServerRequest) (Operation, error) {
	strategy := strings.ToUpper(strings.TrimSpace(req.ReuseStrategy))
	if strategy == "" {
		strategy = ReuseNone
	}
	if strategy != ReuseNone && strategy != ReuseReset && strategy != ReuseRestart {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "reuse_strategy: want NONE, RESET or RESTART, got %q", req.ReuseStrategy)
	}
	req.ImageTag = strings.TrimSpace(req.ImageTag)
	if req.ImageTag == "" || len(req.ImageTag) > 255 || strings.ContainsAny(req.ImageTag, " \t\n") {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "image_tag: want a non-empty image reference without spaces (at most 255 characters)")
	}
	if req.ClientID == "" {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "client_id is required")
	}
	if req.ServerName == "" {
		req.ServerName = "server"
	}
	if len(req.ServerName) > 128 {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "server_name: at most 128 characters")
	}
	envKeys, err := checkEnv(req.Env)
	if err != nil {
		return Operation{}, err
	}
	upstreamNames, err := checkUpstreams(req.MCPUpstreams)
	if err != nil {
		return Operation{}, err
	}
	policy, err := checkRestartPolicy(req.RestartPolicy)
	if err != nil {
		return Operation{}, err
	}
	if err := checkResources((*store.Resources)(req.Resources)); err != nil {
		return Operation{}, err
	}
	if err := checkWait(req.WaitSeconds); err != nil {
		return Operation{}, err
	}
	var res store.Resources
	if req.Resources != nil {
		res = store.Resources(*req.Resources)
	}

	c, err := s.client(ctx, p, rbac.ActionClientUpdate, req.ClientID)
	if err != nil {
		return Operation{}, err
	}
	if req.Namespace != "" && req.Namespace != c.Namespace {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "namespace %q does not match client %s's namespace %q", req.Namespace, c.ID, c.Namespace)
	}
	if c.Status == ClientStopped {
		return Operation{}, wire.Errorf(wire.CodeConflict, "client %s is stopped; register a new client", c.ID)
	}
	if err := s.authorize(ctx, p, rbac.ActionServerCreate, rbac.Resource{Kind: "server", Namespace: c.Namespace}, ""); err != nil {
		return Operation{}, err
	}
	started := store.Started{EnvKeys: envKeys, UpstreamNames: upstreamNames}
	if len(req.Env) > 0 {
		if started.EnvSealed, err = s.seal(req.Env); err != nil {
			return Operation{}, fmt.Errorf("seal env: %w", err)
		}
	}
	if started.UpstreamsSealed, err = s.sealUpstreams(req.MCPUpstreams); err != nil {
		return Operation{}, fmt.Errorf("seal mcp_upstreams: %w", err)
	}
	key := reuseKey(req.ServerName, req.ImageTag, req.RuntimeClassName, res)

	// A warm server is started without the caller's env, upstreams and
	// options, so only plain requests can take one. One whose agent
	// answers now makes the start complete inside this call.
	warmOK := len(req.Env) == 0 && len(req.MCPUpstreams) == 0 && req.RuntimeClassName == "" && res == (store.Resources{}) && s.cfg.WarmPool[req.ImageTag] > 0 &&
		c.Namespace == s.cfg.DefaultNamespace
	checked := ""
	if warmOK && strategy == ReuseNone {
		checked = s.readyWarm(ctx, req.ImageTag, c.Namespace)
	}

	claim := s.claimFor(req.WaitSeconds)
	var op store.Operation
	var tookWarm bool
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		mode := "new"
		srv, ok := store.Server{}, false
		var err error
		if strategy != ReuseNone {
			// RESET keeps the running sandbox, and with it the env and
			// upstreams it was started with; RESTART starts it again with
			// the new ones.
			if srv, ok, err = store.ClaimReusable(ctx, tx, p.UserID, key, c.ID, strategy == ReuseRestart, started); err != nil {
				return err
			}
			if ok {
				mode = strings.ToLower(strategy)
			}
		}
		if !ok {
			n, err := store.CountLiveServers(ctx, tx, p.UserID)
			if err != nil {
				return err
			}
			if n >= s.cfg.MaxServersPerUser {
				return wire.Errorf(wire.CodeTooManyRequests, "server quota reached: %d of %d live servers; stop or finish-and-reuse one", n, s.cfg.MaxServersPerUser)
			}
		}
		if !ok && warmOK {
			if srv, ok, err = store.ClaimWarm(ctx, tx, req.ImageTag, p.UserID, c.ID, c.Namespace, req.ServerName, key, checked); err != nil {
				return err
			}
			if ok {
				mode = "warm"
			}
			tookWarm = ok
		}
		if !ok {
			if srv, err = store.InsertServer(ctx, tx, store.NewServer{
				ClientID: c.ID, OwnerID: p.UserID, Namespace: c.Namespace, ServerName: req.ServerName,
				ImageTag: req.ImageTag, RuntimeClassName: req.RuntimeClassName, ReuseKey: key, Resources: res,
				EnvKeys: envKeys, EnvSealed: started.EnvSealed, UpstreamNames: upstreamNames, UpstreamsSealed: started.UpstreamsSealed,
				Status: ServerStarting,
			}); err != nil {
				return err
			}
		}
		if srv.RestartPolicy != policy || srv.Restarts != 0 {
			if srv, err = store.SetRestartPolicy(ctx, tx, srv.ID, policy); err != nil {
				return err
			}
		}
		params, _ := json.Marshal(startParams{Mode: mode, ClientID: c.ID})
		nop := store.NewOperation{Type: opStartServer, OwnerID: p.UserID, Namespace: c.Namespace, ServerID: srv.ID, Params: params,
			ClaimFor: claim, Lease: s.cfg.OperationLease}
		if mode == "warm" && srv.ID == checked {
			// Nothing left to do: record the start done.
			b, err := json.Marshal(StartServerResult{ServerID: srv.ID, ClientID: c.ID, Warm: true, Server: serverView(srv)})
			if err != nil {
				return err
			}
			result := string(b)
			nop.Result = &result
		}
		op, err = store.InsertOperation(ctx, tx, nop)
		return err
	})
	s.audit(ctx, p, "server.start", "server", op.ServerID, c.Namespace, outcome(err),
		map[string]any{"image_tag": req.ImageTag, "server_name": req.ServerName, "reuse_strategy": strategy, "env_keys": envKeys,
			"mcp_upstreams": upstreamNames, "operation_id": op.ID})
	if err != nil {
		return Operation{}, err
	}
	if tookWarm {
		s.assign(ctx, op.ServerID, c.ID, p.UserID)
	}
	if c.Status == ClientFinished {
		if _, err := s.store.SetClientStatus(ctx, c.ID, ClientAlive); err != nil {
			s.log.Warn("revive finished client", "client_id", c.ID, "err", err)
		}
	}
	return withOperationView(s.scheduled(ctx, op, req.WaitSeconds))
}

// assign tells a runtime that records owners on its sandboxes whose a
// warm sandbox is now. The database claim is the truth; a failure here
// leaves only the sandbox's labels stale, so it is logged, not returned.
func (s *Service) assign(ctx context.Context, serverID, clientID, ownerID string) {
	a, ok := s.rt.(runtime.Assigner)
	if !ok {
		return
	}
	if err := a.Assign(ctx, serverID, clientID, ownerID); err != nil {
		s.log.Warn("label a claimed warm sandbox", "server_id", serverID, "err", err)
	}
}

// readyWarm returns the id of a warm server of image whose agent answers,
// or "". A warm server whose agent does not answer is marked failed, so
// that the watcher replaces it.
func (s *Service) readyWarm(ctx context.Context, image, namespace string) string {
	cands, err := s.store.ReadyWarm(ctx, image, namespace, 3)
	if err != nil {
		s.log.Warn("look up warm servers", "image_tag", image, "err", err)
		return ""
	}
	for _, srv := range cands {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.callAgent(hctx, srv, http.MethodGet, "api/health", nil, nil, maxSmallAnswer)
		cancel()
		if err == nil {
			return srv.ID
		}
		if ctx.Err() != nil {
			return ""
		}
		s.log.Warn("warm server does not answer; replacing it", "server_id", srv.ID, "err", err)
		s.store.SetServerStatus(ctx, srv.ID, ServerFailed, "warm server's agent does not answer: "+err.Error(), ServerRunning)
	}
	return ""
}

// server loads a server and checks the caller may do a to it. A clientID,
// when given, must be the server's.
func (s *Service) server(ctx context.Context, p rbac.Principal, a rbac.Action, id, clientID string) (store.Server, error) {
	if id == "" {
		return store.Server{}, wire.Errorf(wire.CodeBadRequest, "server_id is required")
	}
	srv, err := s.store.ServerByID(ctx, id)
	if err != nil {
		return store.Server{}, err
	}
	if srv.Warm {
		return store.Server{}, wire.Errorf(wire.CodeNotFound, "server %q not found", id)
	}
	if err := s.authorize(ctx, p, a, serverResource(srv), id); err != nil {
		return store.Server{}, err
	}
	if clientID != "" && clientID != srv.ClientID {
		return store.Server{}, wire.Errorf(wire.CodeNotFound, "server %q not found in client %q", id, clientID)
	}
	return srv, nil
}

// GetServer returns one server.
func (s *Service) GetServer(ctx context.Context, p rbac.Principal, id string) (ServerDetail, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerRead, id, "")
	if err != nil {
		return ServerDetail{}, err
	}
	out := ServerDetail{Server: serverView(srv)}
	if r, ok := s.rt.(runtime.EventReporter); ok {
		// Events help; a runtime that cannot give them now must not
		// make the server unreadable.
		if out.Events, err = r.Events(ctx, srv.ID); err != nil {
			s.log.Warn("sandbox events", "server_id", srv.ID, "err", err)
			out.Events = nil
		}
	}
	return out, nil
}

// ListServers returns the caller's servers, optionally of one client.
func (s *Service) ListServers(ctx context.Context, p rbac.Principal, clientID string) ([]Server, error) {
	if err := requireScope(p, rbac.ActionServerRead); err != nil {
		return nil, err
	}
	f := store.ServerFilter{OwnerID: p.UserID, ClientID: clientID}
	if p.IsAdmin("") {
		f.OwnerID = ""
	}
	if clientID != "" {
		if _, err := s.client(ctx, p, rbac.ActionClientRead, clientID); err != nil {
			return nil, err
		}
	}
	all, err := s.store.ListServers(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Server, 0, len(all))
	for _, srv := range all {
		if rbac.Authorize(p, rbac.ActionServerRead, serverResource(srv)) == nil {
			out = append(out, serverView(srv))
		}
	}
	return out, nil
}

// FinishServer marks a running server reusable without deleting it.
func (s *Service) FinishServer(ctx context.Context, p rbac.Principal, ref ServerRef) (Server, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerUpdate, ref.ServerID, ref.ClientID)
	if err != nil {
		return Server{}, err
	}
	out, err := s.finishServer(ctx, srv)
	s.audit(ctx, p, "server.finish", "server", srv.ID, srv.Namespace, outcome(err), nil)
	return withServerView(out, err)
}

func (s *Service) finishServer(ctx context.Context, srv store.Server) (store.Server, error) {
	return s.store.SetServerStatus(ctx, srv.ID, ServerFinished, "", ServerRunning)
}

// StopServer stops a server and deletes its sandbox.
func (s *Service) StopServer(ctx context.Context, p rbac.Principal, ref ServerRef) (Server, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerDelete, ref.ServerID, ref.ClientID)
	if err != nil {
		return Server{}, err
	}
	out, err := s.stopServer(ctx, srv)
	s.audit(ctx, p, "server.stop", "server", srv.ID, srv.Namespace, outcome(err), nil)
	return withServerView(out, err)
}

// stopServer deletes the sandbox and records the server as stopped. A
// server already stopped stays as it is.
func (s *Service) stopServer(ctx context.Context, srv store.Server) (store.Server, error) {
	if srv.Status == ServerStopped {
		return srv, nil
	}
	if _, err := s.store.SetServerStatus(ctx, srv.ID, ServerStopping, ""); err != nil {
		return store.Server{}, err
	}
	if err := s.rt.Delete(ctx, srv.ID); err != nil {
		msg := fmt.Sprintf("delete sandbox: %v", err)
		s.store.SetServerStatus(context.WithoutCancel(ctx), srv.ID, ServerFailed, msg)
		return store.Server{}, fmt.Errorf("stop server %s: %w", srv.ID, err)
	}
	s.fwd.Transports.Forget(s.endpoint(srv))
	return s.store.SetServerStatus(ctx, srv.ID, ServerStopped, "")
}

// RestartServer schedules a restart: the sandbox is deleted and created
// again from its image, with a fresh filesystem.
func (s *Service) RestartServer(ctx context.Context, p rbac.Principal, ref ServerRef, waitSeconds float64) (Operation, error) {
	if err := checkWait(waitSeconds); err != nil {
		return Operation{}, err
	}
	srv, err := s.server(ctx, p, rbac.ActionServerUpdate, ref.ServerID, ref.ClientID)
	if err != nil {
		return Operation{}, err
	}
	// The status is checked in the transaction that schedules the
	// restart: a refused restart must leave nothing behind to run.
	var op store.Operation
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		if srv.Status == ServerFailed {
			// A failed server holds no resources: bringing it back takes
			// a place in the quota like a new one.
			n, err := store.CountLiveServers(ctx, tx, srv.OwnerID)
			if err != nil {
				return err
			}
			if n >= s.cfg.MaxServersPerUser {
				return wire.Errorf(wire.CodeTooManyRequests, "server quota reached: %d of %d live servers; stop or finish-and-reuse one", n, s.cfg.MaxServersPerUser)
			}
		}
		if err := store.MarkRestarting(ctx, tx, srv.ID); err != nil {
			return err
		}
		var err error
		op, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: opRestartServer, OwnerID: srv.OwnerID, Namespace: srv.Namespace, ServerID: srv.ID,
			ClaimFor: s.claimFor(waitSeconds), Lease: s.cfg.OperationLease})
		return err
	})
	s.audit(ctx, p, "server.restart", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"operation_id": op.ID})
	if err != nil {
		return Operation{}, err
	}
	return withOperationView(s.scheduled(ctx, op, waitSeconds))
}

// A log tail is this many lines unless asked otherwise, and at most
// maxLogLines.
const (
	defaultLogLines = 200
	maxLogLines     = 10000
)

// ServerLogs returns the last lines of a server's agent log.
func (s *Service) ServerLogs(ctx context.Context, p rbac.Principal, id string, tail int) (string, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerRead, id, "")
	if err != nil {
		return "", err
	}
	switch {
	case tail == 0:
		tail = defaultLogLines
	case tail < 0 || tail > maxLogLines:
		return "", wire.Errorf(wire.CodeBadRequest, "tail: want 1 to %d lines, got %d", maxLogLines, tail)
	}
	logs, err := s.rt.Logs(ctx, srv.ID, tail)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", wire.Errorf(wire.CodeNotFound, "server %s has no logs (its sandbox is gone)", id)
		}
		return "", err
	}
	return logs, nil
}
