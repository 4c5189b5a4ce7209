package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-mcp/berth/internal/egress"
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
	plan, err := s.checkStart(&req)
	if err != nil {
		return Operation{}, err
	}
	if req.ClientID == "" {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "client_id is required")
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
	if err := s.prepareStart(ctx, &plan, &req, c.Namespace); err != nil {
		return Operation{}, err
	}
	var st started
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		st, err = s.startInTx(ctx, tx, p, req, plan, c)
		return err
	})
	if err := s.afterStart(ctx, p, req, plan, c, st, err); err != nil {
		return Operation{}, err
	}
	return withOperationView(s.scheduled(ctx, st.op, store.Server{}, req.WaitSeconds))
}

// startPlan is a checked start request, ready for startInTx.
type startPlan struct {
	strategy string
	// seal holds the names of the env and upstreams and, once
	// prepareStart ran, their sealed values.
	seal   store.Started
	policy string
	res    store.Resources
	key    string
	// warmOK: the request may take a warm server; checked is one whose
	// agent answered just now ("" = none).
	warmOK  bool
	checked string
	claim   string
	// disk is what the new sandbox takes on its runtime.
	disk int64
	// network is the server's egress policy.
	network egress.Policy
}

// started is what startInTx made.
type started struct {
	op       store.Operation
	tookWarm bool
}

// checkStart checks and normalizes the fields of a start request that
// need no database.
func (s *Service) checkStart(req *StartServerRequest) (startPlan, error) {
	var plan startPlan
	plan.strategy = strings.ToUpper(strings.TrimSpace(req.ReuseStrategy))
	if plan.strategy == "" {
		plan.strategy = ReuseNone
	}
	if plan.strategy != ReuseNone && plan.strategy != ReuseReset && plan.strategy != ReuseRestart {
		return plan, wire.Errorf(wire.CodeBadRequest, "reuse_strategy: want NONE, RESET or RESTART, got %q", req.ReuseStrategy)
	}
	req.ImageTag = strings.TrimSpace(req.ImageTag)
	if req.ImageTag == "" || len(req.ImageTag) > 255 || strings.ContainsAny(req.ImageTag, " \t\n") {
		return plan, wire.Errorf(wire.CodeBadRequest, "image_tag: want a non-empty image reference without spaces (at most 255 characters)")
	}
	if req.ServerName == "" {
		req.ServerName = "server"
	}
	if len(req.ServerName) > 128 {
		return plan, wire.Errorf(wire.CodeBadRequest, "server_name: at most 128 characters")
	}
	var err error
	if plan.seal.EnvKeys, err = checkEnv(req.Env); err != nil {
		return plan, err
	}
	if plan.seal.UpstreamNames, err = checkUpstreams(req.MCPUpstreams); err != nil {
		return plan, err
	}
	if plan.policy, err = checkRestartPolicy(req.RestartPolicy); err != nil {
		return plan, err
	}
	if err := checkResources((*store.Resources)(req.Resources)); err != nil {
		return plan, err
	}
	if err := checkWait(req.WaitSeconds); err != nil {
		return plan, err
	}
	if req.Resources != nil {
		plan.res = store.Resources(*req.Resources)
	}
	if plan.network, err = s.checkNetwork(req.Network); err != nil {
		return plan, err
	}
	return plan, nil
}

// prepareStart does the work of a start that must not run inside its
// transaction: checking the image (and naming it as the runtime does),
// sealing the env and upstreams and asking a warm server's agent whether
// it answers.
func (s *Service) prepareStart(ctx context.Context, plan *startPlan, req *StartServerRequest, namespace string) error {
	tag, err := s.checkImage(ctx, req.ImageTag)
	if err != nil {
		return err
	}
	req.ImageTag = tag
	if len(req.Env) > 0 {
		if plan.seal.EnvSealed, err = s.seal(req.Env); err != nil {
			return fmt.Errorf("seal env: %w", err)
		}
	}
	if plan.seal.UpstreamsSealed, err = s.sealUpstreams(req.MCPUpstreams); err != nil {
		return fmt.Errorf("seal mcp_upstreams: %w", err)
	}
	plan.key = reuseKey(req.ServerName, req.ImageTag, req.RuntimeClassName, plan.res)
	plan.disk = s.sandboxDisk(runtime.Spec{ImageTag: req.ImageTag, RuntimeClassName: req.RuntimeClassName,
		Resources: runtime.Resources{CPU: plan.res.CPU, Memory: plan.res.Memory}})
	// A warm server is started without the caller's env, upstreams and
	// options, so only plain requests can take one. One whose agent
	// answers now makes the start complete inside this call.
	plan.warmOK = len(req.Env) == 0 && len(req.MCPUpstreams) == 0 && req.RuntimeClassName == "" && plan.res == (store.Resources{}) && s.warmWanted(ctx, req.ImageTag) > 0 &&
		namespace == s.cfg.DefaultNamespace
	if plan.warmOK && plan.strategy == ReuseNone {
		plan.checked = s.readyWarm(ctx, req.ImageTag, namespace)
	}
	plan.claim = s.claimFor(store.Server{}, req.WaitSeconds)
	return nil
}

// checkImage refuses an image the runtime says it cannot start, before
// anything is made for a start, and returns the name the runtime knows
// it by (an image reference normalized), which the server records.
// Runtimes that cannot tell up front fail the start itself with their
// own reason.
func (s *Service) checkImage(ctx context.Context, tag string) (string, error) {
	c, ok := runtime.As[runtime.ImageChecker](s.rt)
	if !ok {
		return tag, nil
	}
	name, err := c.CheckImage(ctx, tag)
	var unknown *runtime.UnknownImage
	switch {
	case errors.As(err, &unknown):
		return "", wire.Errorf(wire.CodeBadRequest, "image_tag: %w", err)
	case err != nil:
		return "", fmt.Errorf("check image %q: %w", tag, err)
	}
	return name, nil
}

// warmWanted is the warm pool size of the image the runtime names tag:
// a pool configured as python:3.12 serves starts of
// docker.io/library/python:3.12 and the other way round.
func (s *Service) warmWanted(ctx context.Context, tag string) int {
	if n := s.cfg.WarmPool[tag]; n > 0 {
		return n
	}
	for img, n := range s.cfg.WarmPool {
		if name, err := s.checkImage(ctx, img); err == nil && name == tag {
			return n
		}
	}
	return 0
}

// startInTx obtains the server of a start (reused, warm or new) and
// schedules its start_server operation, inside tx.
func (s *Service) startInTx(ctx context.Context, tx pgx.Tx, p rbac.Principal, req StartServerRequest, plan startPlan, c store.Client) (started, error) {
	var out started
	mode := "new"
	srv, ok := store.Server{}, false
	var err error
	if plan.strategy != ReuseNone {
		// RESET keeps the running sandbox, and with it the env and
		// upstreams it was started with; RESTART starts it again with
		// the new ones.
		if srv, ok, err = store.ClaimReusable(ctx, tx, p.UserID, plan.key, c.ID, plan.strategy == ReuseRestart, plan.seal, s.owner.ID); err != nil {
			return out, err
		}
		if ok {
			mode = strings.ToLower(plan.strategy)
		}
	}
	if !ok {
		if err := s.checkQuotas(ctx, tx, p.UserID, plan.disk); err != nil {
			return out, err
		}
	}
	if !ok && plan.warmOK {
		if srv, ok, err = store.ClaimWarm(ctx, tx, req.ImageTag, p.UserID, c.ID, c.Namespace, req.ServerName, plan.key, plan.checked, s.owner.ID); err != nil {
			return out, err
		}
		if ok {
			mode = "warm"
		}
		out.tookWarm = ok
	}
	if !ok {
		// A new server belongs to the replica the start reached: its
		// caller's next calls most likely reach it too.
		if srv, err = store.InsertServer(ctx, tx, store.NewServer{
			ClientID: c.ID, OwnerID: p.UserID, Namespace: c.Namespace, ServerName: req.ServerName,
			ImageTag: req.ImageTag, RuntimeClassName: req.RuntimeClassName, ReuseKey: plan.key, Resources: plan.res,
			EnvKeys: plan.seal.EnvKeys, EnvSealed: plan.seal.EnvSealed,
			UpstreamNames: plan.seal.UpstreamNames, UpstreamsSealed: plan.seal.UpstreamsSealed, Status: ServerStarting,
			RuntimeOwner: s.owner.ID,
			DiskBytes:    plan.disk,
			Network:      plan.network,
		}); err != nil {
			return out, err
		}
	}
	if !srv.Network.Equal(plan.network) {
		// A reused or warm server takes this start's policy.
		if srv, err = store.SetServerNetwork(ctx, tx, srv.ID, plan.network); err != nil {
			return out, err
		}
	}
	if srv.RestartPolicy != plan.policy || srv.Restarts != 0 {
		if srv, err = store.SetRestartPolicy(ctx, tx, srv.ID, plan.policy); err != nil {
			return out, err
		}
	}
	params, _ := json.Marshal(startParams{Mode: mode, ClientID: c.ID})
	nop := store.NewOperation{Type: opStartServer, OwnerID: p.UserID, Namespace: c.Namespace, ServerID: srv.ID, Params: params,
		ClaimFor: plan.claim, Lease: s.cfg.OperationLease}
	if !s.canAct(srv) {
		// A reused server of another replica: that replica runs it.
		nop.ClaimFor = ""
	}
	if mode == "warm" && srv.ID == plan.checked {
		// Nothing left to do: record the start done.
		b, err := json.Marshal(StartServerResult{ServerID: srv.ID, ClientID: c.ID, Warm: true, Server: serverView(srv)})
		if err != nil {
			return out, err
		}
		result := string(b)
		nop.Result = &result
	}
	out.op, err = store.InsertOperation(ctx, tx, nop)
	return out, err
}

// afterStart audits a start whose transaction ended with err and, when it
// committed, does what follows outside it; it returns err.
func (s *Service) afterStart(ctx context.Context, p rbac.Principal, req StartServerRequest, plan startPlan, c store.Client, st started, err error) error {
	s.audit(ctx, p, "server.start", "server", st.op.ServerID, c.Namespace, outcome(err),
		map[string]any{"image_tag": req.ImageTag, "server_name": req.ServerName, "reuse_strategy": plan.strategy, "env_keys": plan.seal.EnvKeys,
			"mcp_upstreams": plan.seal.UpstreamNames, "operation_id": st.op.ID})
	if err != nil {
		return err
	}
	if plan.warmOK && s.cfg.Observe.WarmClaim != nil {
		s.cfg.Observe.WarmClaim(st.tookWarm)
	}
	if st.tookWarm {
		s.assign(ctx, st.op.ServerID, c.ID, p.UserID)
	}
	if c.Status == ClientFinished {
		if _, err := s.store.SetClientStatus(ctx, c.ID, ClientAlive); err != nil {
			s.log.Warn("revive finished client", "client_id", c.ID, "err", err)
		}
	}
	return nil
}

// assign tells a runtime that records owners on its sandboxes whose a
// warm sandbox is now. The database claim is the truth; a failure here
// leaves only the sandbox's labels stale, so it is logged, not returned.
func (s *Service) assign(ctx context.Context, serverID, clientID, ownerID string) {
	a, ok := runtime.As[runtime.Assigner](s.rt)
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
	cands, err := s.store.ReadyWarm(ctx, image, namespace, 3, s.owner.ID)
	if err != nil {
		s.log.Warn("look up warm servers", "image_tag", image, "err", err)
		return ""
	}
	for _, srv := range cands {
		err := s.pingAgent(ctx, srv)
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
	return ServerDetail{Server: serverView(srv), Placement: s.placement(ctx, srv), Events: s.serverEvents(ctx, srv)}, nil
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
	// Scheduled for a replica that is gone, a restart would wait for it.
	if err := s.ownerGone(ctx, srv); err != nil {
		return Operation{}, err
	}
	// The status is checked in the transaction that schedules the
	// restart: a refused restart must leave nothing behind to run.
	var op store.Operation
	disk := s.sandboxDisk(serverSpec(srv))
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		if srv.Status == ServerFailed {
			// A failed server holds no resources: bringing it back takes
			// a place in the quotas like a new one.
			if err := s.checkQuotas(ctx, tx, srv.OwnerID, disk); err != nil {
				return err
			}
		}
		if err := store.MarkRestarting(ctx, tx, srv.ID, disk); err != nil {
			return err
		}
		var err error
		op, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: opRestartServer, OwnerID: srv.OwnerID, Namespace: srv.Namespace, ServerID: srv.ID,
			ClaimFor: s.claimFor(srv, waitSeconds), Lease: s.cfg.OperationLease})
		return err
	})
	s.audit(ctx, p, "server.restart", "server", srv.ID, srv.Namespace, outcome(err), map[string]any{"operation_id": op.ID})
	if err != nil {
		return Operation{}, err
	}
	return withOperationView(s.scheduled(ctx, op, store.Server{}, waitSeconds))
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
	if err := s.notHere(ctx, srv); err != nil {
		return "", err
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
