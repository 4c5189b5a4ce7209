package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// watcherLock is the advisory lock key held by the one replica that runs
// the watcher.
const watcherLock int64 = 0x62657274_77617463 // "bertwatc"

// watch runs the watcher whenever this replica holds the watcher lock:
// only one replica reaps and fills the warm pool at a time. The lock
// lives on a dedicated connection, so if this replica dies its lock is
// released with the connection and another replica takes over.
func (s *Service) watch(ctx context.Context) {
	for ctx.Err() == nil {
		s.leadWatcher(ctx)
		sleep(ctx, s.cfg.WatchInterval)
	}
}

func (s *Service) leadWatcher(ctx context.Context) {
	conn, err := s.store.Pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, watcherLock).Scan(&got); err != nil || !got {
		return
	}
	defer func() {
		// Bounded: on a dead connection the lock is gone anyway, and an
		// unbounded call would keep Run from returning.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, watcherLock)
	}()
	s.log.Info("this replica runs the watcher")
	for ctx.Err() == nil {
		s.watchOnce(ctx)
		// The lock dies with the connection; check it still answers.
		if err := conn.Ping(ctx); err != nil {
			return
		}
		sleep(ctx, s.cfg.WatchInterval)
	}
}

// watchOnce does one round of the watcher's work. Each task logs its own
// failures so one failing task does not starve the others.
func (s *Service) watchOnce(ctx context.Context) {
	for name, task := range map[string]func(context.Context) error{
		"reap servers":        s.reapServers,
		"fail stuck":          s.failStuckOperations,
		"fill warm pool":      s.fillWarmPool,
		"reconcile sandboxes": s.reconcile,
		"release node holds":  s.releaseNodeHolds,
		"check health":        s.checkHealth,
	} {
		if err := task(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("watcher", "task", name, "err", err)
		}
	}
}

// WatchOnce runs one watcher round now (for tests and `berth` admin
// commands); it does not take the watcher lock.
func (s *Service) WatchOnce(ctx context.Context) { s.watchOnce(ctx) }

// reapServers stops servers idle past the idle timeout and finished
// servers past their time to live.
func (s *Service) reapServers(ctx context.Context) error {
	now := s.now()
	servers, err := s.store.ServersToReap(ctx, now.Add(-s.cfg.IdleTimeout), now.Add(-s.cfg.FinishedTTL))
	if err != nil {
		return err
	}
	for _, srv := range servers {
		why := "idle"
		if srv.Status == ServerFinished {
			why = "finished too long ago"
		}
		s.log.Info("stopping server", "server_id", srv.ID, "reason", why)
		if _, err := s.stopServer(ctx, srv); err != nil {
			s.log.Error("stop server", "server_id", srv.ID, "err", err)
			continue
		}
		if err := s.forgetSession(ctx, srv.ID); err != nil {
			s.log.Error("forget the session of a reaped server", "server_id", srv.ID, "err", err)
		}
	}
	return nil
}

// stuckAfter is how long a scheduled operation may wait for a worker.
const stuckAfter = 10 * time.Minute

func (s *Service) failStuckOperations(ctx context.Context) error {
	ops, err := s.store.StuckOperations(ctx, s.now().Add(-stuckAfter), s.cfg.OperationAttempts)
	if err != nil {
		return err
	}
	for _, op := range ops {
		reason := fmt.Sprintf("no replica finished it after %d attempts", op.Attempts)
		if op.Status == OpScheduled {
			reason = fmt.Sprintf("no replica picked it up within %s", stuckAfter)
		}
		if _, err := s.store.FinishOperation(ctx, op.ID, "", OpFailed, nil, wire.CodeUnavailable, "operation stuck: "+reason); err != nil {
			return err
		}
		if op.ServerID != "" && startsServer(op.Type) {
			s.store.SetServerStatus(ctx, op.ServerID, ServerFailed, "start failed: "+reason, ServerStarting)
		}
		s.log.Warn("failed stuck operation", "operation_id", op.ID, "reason", reason)
	}
	return nil
}

// fillWarmPool starts warm servers until each configured image has its
// count.
func (s *Service) fillWarmPool(ctx context.Context) error {
	for image, want := range s.cfg.WarmPool {
		if err := s.scheduleWarm(ctx, image, want); err != nil {
			return err
		}
	}
	return nil
}

// scheduleWarm counts and adds an image's warm servers in one
// transaction, under the pool's lock.
func (s *Service) scheduleWarm(ctx context.Context, image string, want int) error {
	added := 0
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		added = 0
		have, err := store.CountWarm(ctx, tx, image)
		if err != nil {
			return err
		}
		for ; have < want; have++ {
			srv, err := store.InsertServer(ctx, tx, store.NewServer{
				Namespace: s.cfg.DefaultNamespace, ServerName: "warm", ImageTag: image,
				ReuseKey: "warm", Status: ServerStarting, Warm: true,
			})
			if err != nil {
				return err
			}
			if _, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: opWarmServer, Namespace: s.cfg.DefaultNamespace, ServerID: srv.ID}); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill warm pool %s: %w", image, err)
	}
	if added > 0 {
		s.wake()
	}
	return nil
}

// reconcile deletes sandboxes the database no longer wants (left by a
// crash between deleting a record and its sandbox) and marks servers
// whose sandbox vanished as failed.
func (s *Service) reconcile(ctx context.Context) error {
	// Records first: a server seen RUNNING here had its sandbox before,
	// so a listing taken after that lacks it only if it was deleted.
	live, err := s.store.LiveServerIDs(ctx)
	if err != nil {
		return err
	}
	ids, err := s.rt.List(ctx)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
		if _, ok := live[id]; ok {
			continue
		}
		// A build's sandbox is its job's while the job is active.
		if active, err := s.store.BuildJobActive(ctx, id); err != nil || active {
			continue
		}
		// A server inserted after LiveServerIDs ran is not an orphan.
		if srv, err := s.store.ServerByID(ctx, id); err == nil && srv.Status != ServerStopped && srv.Status != ServerFailed {
			continue
		}
		s.log.Info("deleting orphaned sandbox", "server_id", id)
		if err := s.rt.Delete(ctx, id); err != nil {
			s.log.Error("delete orphaned sandbox", "server_id", id, "err", err)
		}
	}
	for id, status := range live {
		if have[id] || (status != ServerRunning && status != ServerFinished) {
			continue
		}
		// Stops and restarts leave RUNNING and FINISHED before they
		// delete a sandbox; the status condition keeps them as they are.
		const why = "its sandbox vanished; restart the server"
		srv, err := s.store.SetServerStatus(ctx, id, ServerFailed, why, ServerRunning, ServerFinished)
		if err == nil {
			s.recordFailure(ctx, srv, why)
			s.log.Warn("sandbox of a live server vanished; marked failed", "server_id", id)
		} else if !errors.Is(err, store.ErrConflict) {
			s.log.Error("mark server failed", "server_id", id, "err", err)
		}
	}
	return nil
}

// releaseNodeHolds releases the nodes a runtime holds for clients that
// are stopped or gone (stopped while berth was down, or a crash between
// holding and recording).
func (s *Service) releaseNodeHolds(ctx context.Context) error {
	holder, ok := runtime.As[runtime.NodeHolder](s.rt)
	if !ok {
		return nil
	}
	holds, err := holder.Holders(ctx)
	if err != nil {
		return err
	}
	for _, h := range holds {
		c, err := s.store.ClientByID(ctx, h.ClientID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && c.Status != ClientStopped && c.NodesCount > 0 {
			continue
		}
		s.log.Info("releasing the nodes of a client that is gone", "client_id", h.ClientID, "namespace", h.Namespace)
		if err := holder.HoldNodes(ctx, h.Namespace, h.ClientID, 0); err != nil {
			return err
		}
	}
	return nil
}
