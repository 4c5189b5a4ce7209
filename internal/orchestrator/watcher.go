package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// watcherLock is the advisory lock key held by the one replica that runs
// the watcher's global work.
const watcherLock int64 = 0x62657274_77617463 // "bertwatc"

// ownerLock is the advisory lock key held by the one replica that
// reconciles the sandboxes of a runtime owner: every replica of the local
// runtime holds its own, one replica of a cluster holds the cluster's.
func ownerLock(owner string) int64 {
	h := fnv.New64a()
	h.Write([]byte("berth runtime owner " + owner))
	return int64(h.Sum64())
}

// watch runs the replica's rounds of background work until ctx ends, each
// on the one replica holding its lock. The work is split by who may do
// it: decisions about records any replica can take are global (reaping
// idle and finished servers, which schedules their stops for a replica
// that can act on them; failing stuck operations; filling the warm
// pool), while comparing a runtime's sandboxes with the records, deleting
// orphans and finishing lost stops belong to the runtime's owner, since
// no other replica can see or reach its sandboxes. A lock lives on a
// dedicated connection, so if its replica dies the lock is released with
// the connection and another replica takes over.
func (s *Service) watch(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.lead(ctx, watcherLock, "the watcher", s.watchGlobal) })
	wg.Go(func() { s.lead(ctx, ownerLock(s.owner.ID), "the sandbox reconciler", s.watchOwner) })
	wg.Wait()
}

// lead runs round every WatchInterval whenever this replica holds the
// advisory lock key.
func (s *Service) lead(ctx context.Context, key int64, role string, round func(context.Context)) {
	for ctx.Err() == nil {
		s.leadOnce(ctx, key, role, round)
		sleep(ctx, s.cfg.WatchInterval)
	}
}

func (s *Service) leadOnce(ctx context.Context, key int64, role string, round func(context.Context)) {
	conn, err := s.store.Pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil || !got {
		return
	}
	defer func() {
		// Bounded: on a dead connection the lock is gone anyway, and an
		// unbounded call would keep Run from returning.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key)
	}()
	s.log.Info("this replica runs "+role, "runtime_owner", s.owner.Name)
	for ctx.Err() == nil {
		round(ctx)
		// The lock dies with the connection; check it still answers.
		if err := conn.Ping(ctx); err != nil {
			return
		}
		sleep(ctx, s.cfg.WatchInterval)
	}
}

// watchGlobal does one round of the watcher's global work.
func (s *Service) watchGlobal(ctx context.Context) {
	s.runTasks(ctx, map[string]func(context.Context) error{
		"reap servers":   s.reapServers,
		"fail stuck":     s.failStuckOperations,
		"fill warm pool": s.fillWarmPool,
	})
}

// watchOwner does one round of this replica's runtime owner's work.
func (s *Service) watchOwner(ctx context.Context) {
	s.runTasks(ctx, map[string]func(context.Context) error{
		"reconcile sandboxes": s.reconcile,
		"finish lost stops":   s.finishLostStops,
		"release node holds":  s.releaseNodeHolds,
		"check health":        s.checkHealth,
	})
}

// runTasks runs each task once. Each logs its own failures so one failing
// task does not starve the others.
func (s *Service) runTasks(ctx context.Context, tasks map[string]func(context.Context) error) {
	for name, task := range tasks {
		if err := task(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("watcher", "task", name, "err", err)
		}
	}
}

// WatchOnce runs one round of the watcher's global work and of this
// replica's runtime owner's now (for tests and `berth` admin commands); it
// takes neither lock.
func (s *Service) WatchOnce(ctx context.Context) {
	s.watchGlobal(ctx)
	s.watchOwner(ctx)
}

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
		// Scheduled, not waited for: a replica that can act on the
		// sandbox stops it, and the next server is not held up.
		if _, err := s.stopServer(ctx, srv, 0); err != nil {
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
			if srv, err := s.store.ServerByID(ctx, op.ServerID); err == nil {
				if gone := s.ownerGone(ctx, srv); gone != nil {
					reason += "; " + wire.DetailOf(gone).Message
				}
			}
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
	if len(s.cfg.WarmPool) > 0 && s.diskLow(ctx) {
		return nil // the runtime would refuse them: it logged why
	}
	for configured, want := range s.cfg.WarmPool {
		image, err := s.checkImage(ctx, configured)
		if err != nil {
			// New warned of it: the pool fills once the image is there.
			s.log.Debug("warm pool waits for its image", "image_tag", configured, "err", err)
			continue
		}
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
				ReuseKey: "warm", Status: ServerStarting, Warm: true, DiskBytes: s.sandboxDisk(runtime.Spec{ImageTag: image}),
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

// reconcile compares this replica's runtime with the records of the
// sandboxes its owner holds: it deletes sandboxes the records no longer
// want (left by a crash between deleting a record and its sandbox) and
// marks servers whose sandbox vanished as failed. It judges nothing of
// another owner's: another replica's sandboxes are not in this runtime's
// list, and their records are that replica's to reconcile.
func (s *Service) reconcile(ctx context.Context) error {
	// Records first: a server seen RUNNING here had its sandbox before,
	// so a listing taken after that lacks it only if it was deleted.
	live, err := s.store.LiveServerIDs(ctx, s.owner.ID)
	if err != nil {
		return err
	}
	ids, err := s.rt.List(ctx)
	if err != nil {
		return err
	}
	if s.owner.ID != "" {
		// Servers recorded before owners were, whose sandboxes this
		// runtime holds, are this owner's from now on (from the next
		// round, which reads them as such).
		if n, err := s.store.ClaimUnplaced(ctx, s.owner.ID, ids); err != nil {
			return err
		} else if n > 0 {
			s.log.Info("recorded this runtime as the owner of sandboxes it holds", "servers", n, "runtime_owner", s.owner.Name)
		}
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
		srv, err := s.store.ServerByID(ctx, id)
		// A server inserted after LiveServerIDs ran is not an orphan,
		// nor is one recorded as another owner's (no sandbox of this
		// runtime's should be: it is left alone rather than judged).
		if err == nil && (srv.Status != ServerStopped && srv.Status != ServerFailed || !s.canAct(srv)) {
			continue
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
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
