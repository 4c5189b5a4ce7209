package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Health checks of the agents. A sandbox's process can live on while its
// agent answers nothing (root in the sandbox stopped it, or took its
// socket), which no exit reports. So each watcher round asks every
// running server's agent for its health, each within HealthCheckTimeout:
// a server whose agent fails is shown unhealthy (get_server, the
// console, metrics) from its first failed check, its idle connections are
// closed, and once its checks have failed for UnhealthyAfter it is FAILED
// with that reason, or restarted under restart_policy on_failure.

// healthCheckers bounds the health checks one round runs at once.
const healthCheckers = 16

// pingAgent asks srv's agent whether it answers, within a health check's
// deadline.
func (s *Service) pingAgent(ctx context.Context, srv store.Server) error {
	return s.callAgent(ctx, srv, s.healthCall(), http.MethodGet, "api/health", nil, nil, maxSmallAnswer)
}

// checkHealth checks the agent of every server that should have one
// answering and whose sandbox this replica can reach: it runs in the
// runtime owner's round (watchOwner), so a local runtime checks only its
// own sandboxes and one replica of a cluster checks the cluster's.
func (s *Service) checkHealth(ctx context.Context) error {
	servers, err := s.store.ServersToCheck(ctx)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, healthCheckers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, srv := range servers {
		if !s.canAct(srv) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.checkServer(ctx, srv)
		})
	}
	return nil
}

// checkServer checks one server's agent and records what it found.
func (s *Service) checkServer(ctx context.Context, srv store.Server) {
	err := s.pingAgent(ctx, srv)
	if ctx.Err() != nil {
		return // this replica is stopping; the check says nothing
	}
	if err == nil {
		if srv.UnhealthySince != nil {
			if err := s.store.MarkHealthy(ctx, srv.ID); err != nil {
				s.log.Error("record a healthy agent", "server_id", srv.ID, "err", err)
				return
			}
			s.log.Info("agent answers its health checks again", "server_id", srv.ID)
		}
		return
	}
	// Its keep-alive connections lead to the agent that just did not
	// answer: the next call dials afresh.
	s.fwd.Transports.CloseIdle(s.endpoint(srv))
	msg := "its agent did not answer a health check: " + wire.DetailOf(err).Message
	failing, first, merr := s.store.MarkUnhealthy(ctx, srv.ID, msg)
	switch {
	case errors.Is(merr, store.ErrConflict):
		return // stopped or restarted meanwhile
	case merr != nil:
		s.log.Error("record an unhealthy agent", "server_id", srv.ID, "err", merr)
		return
	}
	if first {
		s.log.Warn("agent fails its health check", "server_id", srv.ID, "err", err)
		s.audit(ctx, rbac.Principal{Username: "berth"}, "server.unhealthy", "server", srv.ID, srv.Namespace, "error", map[string]any{"reason": msg})
	}
	if failing >= s.cfg.UnhealthyAfter {
		why := fmt.Sprintf("its agent stopped answering health checks for %d s", int(failing/time.Second))
		if err := s.failOrRecover(ctx, srv, why, true); err != nil {
			s.log.Error("fail a server whose agent hung", "server_id", srv.ID, "err", err)
		}
	}
}

// recoverParams are a recover_server operation's parameters.
type recoverParams struct {
	// EndSandbox says the sandbox is still there, its agent hung: its
	// processes must end before it is created again.
	EndSandbox bool `json:"end_sandbox,omitempty"`
}

// endSandbox ends the processes of a sandbox whose agent hung, keeping
// its workspace where the runtime can (runtime.Stopper); elsewhere the
// sandbox is deleted, files and all, since Create would keep the hung one.
func (s *Service) endSandbox(ctx context.Context, serverID string) error {
	if st, ok := runtime.As[runtime.Stopper](s.rt); ok {
		if err := st.Stop(ctx, serverID); err != nil {
			return fmt.Errorf("end the hung sandbox: %w", err)
		}
		return nil
	}
	if err := s.rt.Delete(ctx, serverID); err != nil {
		return fmt.Errorf("delete the hung sandbox: %w", err)
	}
	return nil
}

func decodeRecoverParams(op store.Operation) (recoverParams, error) {
	var p recoverParams
	if len(op.Params) > 0 {
		if err := json.Unmarshal(op.Params, &p); err != nil {
			return p, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
		}
	}
	return p, nil
}
