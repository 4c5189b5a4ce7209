package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// A stop is an operation like a start: the server becomes STOPPING and a
// stop_server operation is scheduled in one transaction, and a replica
// that can act on the sandbox deletes it and records the server STOPPED.
// So a stop survives its replica: one killed in the middle leaves the
// operation under a lease that runs out, and a replica that can act on
// the sandbox (any replica on Kubernetes; the owner, restarted, on the
// local runtime) takes it over and does it again (deleting is
// idempotent). A stop used to be a plain call, and a replica killed in the
// middle left its server STOPPING for ever.

// opStopServer deletes a server's sandbox and records it stopped.
const opStopServer = "stop_server"

// stopWait bounds how long a call to stop a server waits for the stop to
// end: a sandbox gets 10 s to stop on SIGTERM, then SIGKILL, then its
// resources are removed.
const stopWait = time.Minute

// StopServer stops a server and deletes its sandbox. It answers the
// server as it is once the stop ended, or STOPPING when the stop is still
// under way after stopWait or must wait for the replica holding the
// sandbox, which finishes it when it is back.
func (s *Service) StopServer(ctx context.Context, p rbac.Principal, ref ServerRef) (Server, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerDelete, ref.ServerID, ref.ClientID)
	if err != nil {
		return Server{}, err
	}
	out, err := s.stopServer(ctx, srv, stopWait)
	s.audit(ctx, p, "server.stop", "server", srv.ID, srv.Namespace, outcome(err), nil)
	return withServerView(out, err)
}

// stopServer marks the server STOPPING and schedules its stop, run at
// once here when this replica can act on the sandbox and someone waits,
// else by a replica that can; it waits up to wait for the stop and
// returns the server as it then is. A stop already scheduled is waited
// for rather than scheduled again, and a server already stopped stays as
// it is.
func (s *Service) stopServer(ctx context.Context, srv store.Server, wait time.Duration) (store.Server, error) {
	if srv.Status == ServerStopped {
		return srv, nil
	}
	note := ""
	if gone := s.ownerGone(ctx, srv); gone != nil {
		// Nobody can delete the sandbox now: the stop frees the quota
		// and waits for its owner, so waiting here would be for nothing.
		note = "stopping: " + wire.DetailOf(gone).Message
		wait = 0
	}
	var (
		op      store.Operation
		stopped bool
	)
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		marked, err := store.MarkStopping(ctx, tx, srv.ID, note)
		if err != nil || !marked {
			stopped = err == nil
			return err
		}
		var pending bool
		if op, pending, err = store.PendingOperation(ctx, tx, srv.ID, opStopServer); err != nil || pending {
			return err
		}
		op, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: opStopServer, OwnerID: srv.OwnerID, Namespace: srv.Namespace, ServerID: srv.ID,
			ClaimFor: s.claimFor(srv, wait.Seconds()), Lease: s.cfg.OperationLease})
		return err
	})
	if err != nil {
		return store.Server{}, fmt.Errorf("stop server %s: %w", srv.ID, err)
	}
	if !stopped {
		done, err := s.scheduled(ctx, op, store.Server{}, wait.Seconds())
		if err != nil {
			return store.Server{}, err
		}
		if done.Status == OpFailed {
			return store.Server{}, wire.Errorf(codeOr(done.ErrorCode, wire.CodeInternal), "stop server %s: %s", srv.ID, done.Error)
		}
	}
	return s.store.ServerByID(ctx, srv.ID)
}

func codeOr(code, otherwise string) string {
	if code == "" {
		return otherwise
	}
	return code
}

// execStop deletes a stopping server's sandbox and records the server
// STOPPED; run again after its replica died, it does what is left.
func (s *Service) execStop(ctx context.Context, op store.Operation) (any, error) {
	srv, err := s.store.ServerByID(ctx, op.ServerID)
	if err != nil {
		return nil, err
	}
	if srv.Status == ServerStopped {
		return serverView(srv), nil
	}
	if err := s.rt.Delete(ctx, srv.ID); err != nil {
		if ctx.Err() != nil {
			return nil, err // shutting down: the next attempt finishes it
		}
		msg := fmt.Sprintf("delete sandbox: %v", err)
		s.store.SetServerStatus(context.WithoutCancel(ctx), srv.ID, ServerFailed, msg)
		return nil, fmt.Errorf("stop server %s: %w", srv.ID, err)
	}
	s.fwd.Transports.Forget(s.endpoint(srv))
	out, err := s.store.SetServerStatus(ctx, srv.ID, ServerStopped, "")
	if err != nil {
		return nil, err
	}
	return serverView(out), nil
}

// finishLostStops schedules again the stops of servers this replica can
// act on that are STOPPING with no stop under way: left by a berth
// before stops were operations, or whose operation was failed as stuck
// while the owner was away.
func (s *Service) finishLostStops(ctx context.Context) error {
	lost, err := s.store.StoppingUnscheduled(ctx, s.owner.ID, opStopServer)
	if err != nil {
		return err
	}
	for _, srv := range lost {
		s.log.Info("finishing a stop that was left unfinished", "server_id", srv.ID)
		if _, err := s.stopServer(ctx, srv, 0); err != nil {
			return err
		}
	}
	return nil
}
