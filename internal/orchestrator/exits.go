package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Restart policies of a server: what happens when its sandbox stops on
// its own.
const (
	RestartNever     = "never"
	RestartOnFailure = "on_failure"
)

// opRecoverServer recreates a sandbox that stopped on its own, keeping its
// files (restart_server, by contrast, starts from a fresh filesystem).
const opRecoverServer = "recover_server"

func checkRestartPolicy(p string) (string, error) {
	switch p {
	case "", RestartNever:
		return RestartNever, nil
	case RestartOnFailure:
		return p, nil
	}
	return "", wire.Errorf(wire.CodeBadRequest, "restart_policy: want %q or %q, got %q", RestartNever, RestartOnFailure, p)
}

// exitQueue hands sandbox exits from the runtime's goroutines to the one
// goroutine of Run that records them; it never drops one and never blocks
// the runtime.
type exitQueue struct {
	mu      sync.Mutex
	pending []runtime.Exit
	signal  chan struct{}
}

func (q *exitQueue) push(e runtime.Exit) {
	q.mu.Lock()
	q.pending = append(q.pending, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *exitQueue) take() []runtime.Exit {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}

// watchExits records every sandbox that the runtime reports stopped on
// its own, until ctx ends. Runtimes that cannot report exits are covered
// by the watcher's reconcile round only.
func (s *Service) watchExits(ctx context.Context) {
	w, ok := runtime.As[runtime.Watcher](s.rt)
	if !ok {
		return
	}
	q := &exitQueue{signal: make(chan struct{}, 1)}
	w.Watch(ctx, q.push)
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.signal:
		}
		for _, e := range q.take() {
			if err := s.sandboxExited(ctx, e); err != nil && ctx.Err() == nil {
				s.log.Error("record a stopped sandbox", "server_id", e.ServerID, "err", err)
			}
		}
	}
}

// sandboxExited marks a server whose sandbox stopped on its own FAILED,
// with the reason, or schedules its automatic restart when its policy
// asks for one and it has restarts left.
func (s *Service) sandboxExited(ctx context.Context, e runtime.Exit) error {
	srv, err := s.store.ServerByID(ctx, e.ServerID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // a sandbox the database does not know: reconcile deletes it
	}
	if err != nil {
		return err
	}
	// A starting server's start sees the exit itself; a stopping one is
	// meant to go. Another owner's server is not this replica's to judge.
	if srv.Status != ServerRunning && srv.Status != ServerFinished || !s.canAct(srv) {
		return nil
	}
	return s.failOrRecover(ctx, srv, "its sandbox stopped on its own: "+e.Reason, false)
}

// failOrRecover marks srv FAILED for why, or schedules its automatic
// restart when its policy asks for one and it has restarts left.
// endSandbox says its sandbox is still there (its agent hung) and must
// end before it is created again.
func (s *Service) failOrRecover(ctx context.Context, srv store.Server, why string, endSandbox bool) error {
	s.fwd.Transports.Forget(s.endpoint(srv))
	if srv.RestartPolicy == RestartOnFailure {
		restarted, err := s.scheduleRecovery(ctx, srv, why, endSandbox)
		if err != nil {
			return err
		}
		if restarted {
			s.recordFailure(ctx, srv, why+"; restarting it (restart_policy on_failure)")
			return nil
		}
		why += fmt.Sprintf(" (not restarted again: restart_policy on_failure allows %d restarts in a row)", s.cfg.MaxRestarts)
	}
	_, err := s.store.SetServerStatus(ctx, srv.ID, ServerFailed, why, ServerRunning, ServerFinished)
	if errors.Is(err, store.ErrConflict) {
		return nil // stopped or restarted meanwhile
	}
	if err != nil {
		return err
	}
	// A sandbox still there (an agent answering nothing) goes with the
	// next reconcile round, as any failed server's does.
	s.recordFailure(ctx, srv, why)
	s.log.Warn("server failed", "server_id", srv.ID, "owner_id", srv.OwnerID, "reason", why)
	return nil
}

// scheduleRecovery moves the server back to STARTING and schedules the
// recreation of its sandbox, unless its restarts are used up. endSandbox
// says the sandbox is still there (its agent hung) and must end first.
func (s *Service) scheduleRecovery(ctx context.Context, srv store.Server, why string, endSandbox bool) (bool, error) {
	params, err := json.Marshal(recoverParams{EndSandbox: endSandbox})
	if err != nil {
		return false, err
	}
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		up, err := store.MarkRecovering(ctx, tx, srv.ID, why+"; restarting it", s.cfg.MaxRestarts)
		if err != nil {
			return err
		}
		srv = up
		_, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: opRecoverServer, OwnerID: srv.OwnerID, Namespace: srv.Namespace, ServerID: srv.ID,
			Params: params})
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.log.Warn("restarting a server that failed on its own", "server_id", srv.ID, "restart", srv.Restarts, "of", s.cfg.MaxRestarts, "reason", why)
	s.wake()
	return true, nil
}

// execRecover recreates the sandbox of a server being restarted after it
// stopped on its own or its agent hung, keeping its files.
func (s *Service) execRecover(ctx context.Context, op store.Operation) (any, error) {
	params, err := decodeRecoverParams(op)
	if err != nil {
		return nil, err
	}
	srv, err := s.store.ServerByID(ctx, op.ServerID)
	if err != nil {
		return nil, err
	}
	s.fwd.Transports.Forget(s.endpoint(srv))
	if params.EndSandbox {
		if err := s.endSandbox(ctx, srv.ID); err != nil {
			return nil, err
		}
	}
	srv, err = s.bringUp(ctx, srv, false)
	if err != nil {
		return nil, err
	}
	return StartServerResult{ServerID: srv.ID, ClientID: srv.ClientID, Server: serverView(srv)}, nil
}
