package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// execute runs one operation and returns its result.
func (s *Service) execute(ctx context.Context, op store.Operation) (any, error) {
	ctx = withOperation(ctx, op.ID)
	switch op.Type {
	case opStartServer:
		return s.execStart(ctx, op)
	case opWarmServer:
		srv, err := s.store.ServerByID(ctx, op.ServerID)
		if err != nil {
			return nil, err
		}
		up, err := s.bringUp(ctx, srv, false)
		if err != nil {
			return nil, err
		}
		// Opens this replica's keep-alive connection to the agent, so the
		// health check of a start that takes it needs no dial.
		if err := s.pingAgent(ctx, up); err != nil {
			s.log.Warn("warm server health check", "server_id", srv.ID, "err", err)
		}
		return map[string]string{"server_id": srv.ID}, nil
	case opRestartServer:
		srv, err := s.store.ServerByID(ctx, op.ServerID)
		if err != nil {
			return nil, err
		}
		srv, err = s.bringUp(ctx, srv, true)
		if err != nil {
			return nil, err
		}
		return StartServerResult{ServerID: srv.ID, ClientID: srv.ClientID, Reused: ReuseRestart, Server: serverView(srv)}, nil
	case opRecoverServer:
		return s.execRecover(ctx, op)
	case opStopServer:
		return s.execStop(ctx, op)
	case opRunBash:
		return s.execRunBash(ctx, op)
	case opRunTests:
		return s.execRunTests(ctx, op)
	case opBuildImage:
		return s.execBuild(ctx, op)
	default:
		return nil, fmt.Errorf("unknown operation type %q", op.Type)
	}
}

func (s *Service) execStart(ctx context.Context, op store.Operation) (any, error) {
	var params startParams
	if err := json.Unmarshal(op.Params, &params); err != nil {
		return nil, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
	}
	srv, err := s.store.ServerByID(ctx, op.ServerID)
	if err != nil {
		return nil, err
	}
	res := StartServerResult{ServerID: srv.ID, ClientID: srv.ClientID}
	switch params.Mode {
	case "warm":
		res.Warm = true
		srv, err = s.bringUp(ctx, srv, false)
	case "reset":
		// Same sandbox, same files; only its shells end.
		res.Reused = ReuseReset
		if srv, err = s.bringUp(ctx, srv, false); err == nil {
			err = s.callAgent(ctx, srv, s.fileCall("ending its shell sessions"), http.MethodDelete, "api/sessions", nil, nil, maxSmallAnswer)
		}
	case "restart":
		res.Reused = ReuseRestart
		srv, err = s.bringUp(ctx, srv, true)
	default:
		srv, err = s.bringUp(ctx, srv, false)
	}
	if err != nil {
		return nil, err
	}
	res.Server = serverView(srv)
	return res, nil
}

// bringUp creates the server's sandbox (after deleting the old one when
// fresh is set), waits for its agent and records it running. On failure
// the server is marked failed and its sandbox removed, unless this
// replica is only being shut down.
func (s *Service) bringUp(ctx context.Context, srv store.Server, fresh bool) (store.Server, error) {
	fail := func(err error) (store.Server, error) {
		if ctx.Err() != nil && context.Cause(ctx) == ctx.Err() {
			return store.Server{}, err
		}
		bg := context.WithoutCancel(ctx)
		if delErr := s.rt.Delete(bg, srv.ID); delErr != nil {
			s.log.Warn("clean up failed sandbox", "server_id", srv.ID, "err", delErr)
		}
		// Only from a live status: a server stopped while it was starting
		// stays stopped.
		s.store.SetServerStatus(bg, srv.ID, ServerFailed, err.Error(), ServerStarting, ServerRunning)
		return store.Server{}, err
	}
	if srv.RuntimeOwner == "" && s.owner.ID != "" {
		// A server nobody placed yet (a warm one) becomes this
		// replica's before its sandbox exists, so that no other replica
		// ever judges the sandbox as one of its own.
		if err := s.store.PlaceServer(ctx, srv.ID, s.owner.ID); err != nil {
			return store.Server{}, fmt.Errorf("place server %s: %w", srv.ID, err)
		}
		srv.RuntimeOwner = s.owner.ID
	}
	if fresh {
		if err := s.rt.Delete(ctx, srv.ID); err != nil {
			return fail(fmt.Errorf("delete old sandbox: %w", err))
		}
		// Keep-alive connections to the old agent are dead.
		s.fwd.Transports.Forget(s.endpoint(srv))
	}
	var env map[string]string
	if err := s.unseal(srv.EnvSealed, &env); err != nil {
		return fail(fmt.Errorf("server %s env: %w", srv.ID, err))
	}
	upstreams, err := s.upstreamsOf(srv)
	if err != nil {
		return fail(fmt.Errorf("server %s mcp_upstreams: %w", srv.ID, err))
	}
	spec := runtime.Spec{
		ServerID: srv.ID, Namespace: srv.Namespace, ClientID: srv.ClientID, OwnerID: srv.OwnerID,
		ImageTag: srv.ImageTag, RuntimeClassName: srv.RuntimeClassName,
		Resources: runtime.Resources{CPU: srv.Resources.CPU, Memory: srv.Resources.Memory},
		Env:       env, AgentToken: s.agentToken(srv.ID), Upstreams: upstreams,
	}
	// A first pull of the sandbox's image may take long: its progress is
	// the operation's.
	report, stop := s.recordProgress(ctx)
	spec.Progress = report
	err = s.rt.Create(ctx, spec)
	stop()
	if err != nil {
		return fail(fmt.Errorf("create sandbox: %w", err))
	}
	readyCtx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	ep, err := s.rt.WaitReady(readyCtx, srv.ID)
	if err != nil {
		return fail(fmt.Errorf("wait for sandbox: %w", err))
	}
	up, err := s.store.SetServerRunning(ctx, srv.ID, store.Endpoint{Network: ep.Network, Address: ep.Address})
	if err != nil {
		// Stopped while it started, most likely: its sandbox must not
		// outlive the record.
		return fail(err)
	}
	return up, nil
}
