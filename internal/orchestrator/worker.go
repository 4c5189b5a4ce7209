package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// workers is how many operations one replica runs at once.
const workers = 4

// claimTimeout bounds one claim query, which runs to its end even when
// the replica is shutting down.
const claimTimeout = 30 * time.Second

// Run runs the replica's background work until ctx ends: the operation
// event listener, the operation workers, the watcher (see watch) and the
// record that this replica's runtime owner is alive.
func (s *Service) Run(ctx context.Context) error {
	s.inline.start(ctx)
	defer s.inline.stop()
	var wg sync.WaitGroup
	wg.Go(func() { s.events.run(ctx) })
	for range workers {
		wg.Go(func() { s.work(ctx) })
	}
	wg.Go(func() { s.watch(ctx) })
	wg.Go(func() { s.watchExits(ctx) })
	wg.Go(func() { s.quota.run(ctx) })
	for range releaseWorkers {
		wg.Go(func() { s.sendReleases(ctx) })
	}
	wg.Go(func() { s.seeOwners(ctx) })
	wg.Go(func() { s.writeEgressLog(ctx) })
	wg.Wait()
	s.fwd.Transports.Close()
	return nil
}

// work claims and runs operations until ctx ends. It sleeps until a
// notification announces new work, or until half a lease has passed so
// that operations of a dead replica are taken over.
func (s *Service) work(ctx context.Context) {
	idle := s.cfg.OperationLease / 2
	for ctx.Err() == nil {
		// The claim is not cancelled midway: a cancelled query may still
		// run on the server after this replica stopped listening for its
		// answer, leaving a claim nobody acts on until its lease ends.
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		op, ok, err := s.store.ClaimOperation(claimCtx, s.cfg.ReplicaID, s.owner.ID, s.cfg.OperationLease)
		cancel()
		if ok && ctx.Err() != nil {
			if err := s.store.UnclaimOperation(context.WithoutCancel(ctx), op.ID, store.LeaseHolder(s.cfg.ReplicaID, op.Attempts)); err != nil {
				s.log.Warn("give back an operation at shutdown", "operation_id", op.ID, "err", err)
			}
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("claim operation", "err", err)
			}
			sleep(ctx, time.Second)
			continue
		}
		if !ok {
			select {
			case <-ctx.Done():
			case <-s.wakeups:
			case <-time.After(idle):
			}
			continue
		}
		// One wakeup stands for any number of new operations: pass it on
		// so that another worker looks for the next one while this one
		// runs.
		s.wake()
		s.runOperation(ctx, op)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// startsServer says whether an operation type brings a server up.
func startsServer(opType string) bool {
	return opType == opStartServer || opType == opRestartServer || opType == opWarmServer || opType == opRecoverServer
}

// runOperation runs one claimed operation, renewing its lease while it
// runs, and records the outcome. It returns the operation as finished,
// when this replica recorded the outcome.
func (s *Service) runOperation(ctx context.Context, op store.Operation) (store.Operation, bool) {
	log := s.log.With("operation_id", op.ID, "type", op.Type, "attempt", op.Attempts)
	// Every operation may run again after the replica running it died:
	// starting and restarting sandboxes are idempotent (every resource is
	// named after the server id), and a command is not run again but
	// re-attached to on its agent (takeover.go).
	if op.Attempts > s.cfg.OperationAttempts {
		return s.finish(ctx, op, nil, fmt.Errorf("gave up after %d attempts", op.Attempts-1))
	}
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.renewLease(opCtx, cancel, op) })
	log.Info("operation started")
	runCtx, done := s.cfg.Observe.Operation.Bind(op.Type)(opCtx)
	result, err := s.execute(runCtx, op)
	done(err)
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		// This replica is shutting down: leave the operation to another
		// replica, which takes it over when the lease ends (a command
		// runs on, on its agent, for that replica to collect).
		log.Info("operation interrupted by shutdown; another replica will take it over")
		return store.Operation{}, false
	}
	run, onAgent := result.(agentRun)
	if onAgent {
		result = run.result
	}
	finished, ok := s.finish(ctx, op, result, err)
	if onAgent {
		s.afterRun(ctx, op, run, ok)
	}
	return finished, ok
}

func (s *Service) renewLease(ctx context.Context, cancel context.CancelFunc, op store.Operation) {
	id, holder := op.ID, store.LeaseHolder(s.cfg.ReplicaID, op.Attempts)
	t := time.NewTicker(s.cfg.OperationLease / 3)
	defer t.Stop()
	// A status change by anyone else (CancelOperation, on any replica)
	// ends the lease: renewing at once on its notification stops the
	// work within a round trip instead of a third of a lease.
	changed, unsubscribe := s.events.subscribe(id, leaveChanges)
	defer unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		ok, err := s.store.RenewLease(ctx, id, holder, s.cfg.OperationLease)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("renew operation lease", "operation_id", id, "err", err)
			continue
		}
		if !ok && ctx.Err() == nil {
			s.log.Warn("operation lease lost or operation cancelled; stopping work on it", "operation_id", id)
			cancel()
			return
		}
	}
}

// finish records an operation's outcome and returns the operation as
// recorded; false when it was not (the lease was lost, or the database
// could not be reached).
func (s *Service) finish(ctx context.Context, op store.Operation, result any, runErr error) (store.Operation, bool) {
	status, code, msg := OpSucceeded, "", ""
	var text *string
	if runErr != nil {
		// The code keeps what kind of failure it was: a command the agent
		// refused (bad_request) is not a sandbox that broke (bad_gateway).
		d := wire.DetailOf(runErr)
		status, code, msg = OpFailed, d.Code, d.Message
	} else if e, ok := result.(encoded); ok {
		t := string(e)
		text = &t
	} else if result != nil {
		b, err := wire.Marshal(result)
		if err != nil {
			status, code, msg = OpFailed, wire.CodeInternal, fmt.Sprintf("encode result: %v", err)
		} else {
			t := string(b)
			text = &t
		}
	}
	bg := context.WithoutCancel(ctx)
	// The outcome is worth a few tries: a connection the pool still
	// holds may have died under it (a database restart or failover), and
	// the next try gets a fresh one. FinishOperation only changes an
	// operation this replica still holds, so a try that did commit before
	// its answer was lost makes the next one report !ok, not a second
	// outcome.
	var done store.Operation
	var ok bool
	var err error
	for try := 1; ; try++ {
		done, ok, err = s.store.FinishedOperation(bg, op, store.LeaseHolder(s.cfg.ReplicaID, op.Attempts), status, text, code, msg)
		if err == nil || try == 4 {
			break
		}
		s.log.Warn("record operation outcome; trying again", "operation_id", op.ID, "try", try, "err", err)
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
	if ok && status == OpFailed && startsServer(op.Type) && op.ServerID != "" {
		// A start that failed before or after bringUp (bad parameters,
		// too many attempts) must not leave its server STARTING for ever,
		// holding a place in the quota; the watcher deletes its sandbox.
		s.store.SetServerStatus(bg, op.ServerID, ServerFailed, msg, ServerStarting)
	}
	switch {
	case err != nil:
		s.log.Error("record operation outcome", "operation_id", op.ID, "err", err)
	case !ok:
		s.log.Warn("operation outcome not recorded: lease lost", "operation_id", op.ID)
	default:
		s.log.Info("operation finished", "operation_id", op.ID, "type", op.Type, "status", status, "error", msg)
	}
	return done, ok && err == nil
}
