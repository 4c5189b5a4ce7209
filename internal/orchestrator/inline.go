package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/store"
)

// inline runs operations on the replica that scheduled them when the
// caller waits for the result (wait_seconds): the operation is inserted
// already claimed, so no worker has to be woken and no notification has to
// come back, which saves a durable commit and a round trip through the
// listener. The operation is still a leased row like any other: if this
// replica dies, another takes it over when the lease ends.
//
// Inline runs belong to Run, not to the request that started them: a
// caller that goes away does not cancel its operation, and Run does not
// return before they end.
type inline struct {
	mu  sync.Mutex
	ctx context.Context // Run's context while Run runs, else nil
	wg  sync.WaitGroup
}

// start makes inline runs possible under ctx until stop is called.
func (in *inline) start(ctx context.Context) {
	in.mu.Lock()
	in.ctx = ctx
	in.mu.Unlock()
}

// stop refuses new inline runs and waits for the running ones.
func (in *inline) stop() {
	in.mu.Lock()
	in.ctx = nil
	in.mu.Unlock()
	in.wg.Wait()
}

// claimFor names the replica to pre-claim a new operation on srv for, or
// "" when it should be left to the workers: nobody waits for it, Run is
// not running here to own an inline run, or this replica cannot act on
// srv's sandbox (a replica that can will claim it). srv is zero for work
// on no server yet.
func (s *Service) claimFor(srv store.Server, waitSeconds float64) string {
	if waitSeconds <= 0 || !s.canAct(srv) {
		return ""
	}
	return s.inlineReplica()
}

// inlineReplica names this replica when its Run is running to own inline
// runs, else "".
func (s *Service) inlineReplica() string {
	s.inline.mu.Lock()
	defer s.inline.mu.Unlock()
	if s.inline.ctx == nil || s.inline.ctx.Err() != nil {
		return ""
	}
	return s.cfg.ReplicaID
}

// inlineRun is a running inline operation: done is closed when it ended,
// and then finished holds the operation as recorded (ok false: not
// recorded by this run, re-read it).
type inlineRun struct {
	done     chan struct{}
	finished store.Operation
	ok       bool
}

// runInline starts a pre-claimed operation on srv, the server the caller
// just loaded (so the run need not load it again; zero when the run is
// to load what it needs itself), and returns its run.
// When Run stopped in between, it returns nil: the claim then runs out
// and another replica (or this one, restarted) takes the operation over.
func (s *Service) runInline(op store.Operation, srv store.Server) *inlineRun {
	s.inline.mu.Lock()
	defer s.inline.mu.Unlock()
	ctx := s.inline.ctx
	if ctx == nil {
		return nil
	}
	run := &inlineRun{done: make(chan struct{})}
	s.inline.wg.Add(1)
	go func() {
		defer s.inline.wg.Done()
		defer close(run.done)
		if srv.ID != "" {
			ctx = withLoadedServer(ctx, srv)
		}
		run.finished, run.ok = s.runOperation(ctx, op)
	}()
	return run
}

// scheduled finishes scheduling op: a pre-claimed operation starts here
// and the caller waits for it directly; any other is left to the workers
// and waited for through notifications.
func (s *Service) scheduled(ctx context.Context, op store.Operation, srv store.Server, waitSeconds float64) (store.Operation, error) {
	if op.Status != OpInProgress {
		s.wake()
		return s.waitOperation(ctx, op, waitSeconds)
	}
	run := s.runInline(op, srv)
	if run == nil {
		return op, nil
	}
	timer := time.NewTimer(time.Duration(waitSeconds * float64(time.Second)))
	defer timer.Stop()
	progressFrom(ctx)(operationView(op))
	// The run records its progress (a start's pull) in the operation's
	// row, announced like a change of status.
	changed, unsubscribe := s.events.subscribe(op.ID, progressChanges)
	defer unsubscribe()
	last := progressOf(op)
wait:
	for {
		select {
		case <-run.done:
			if run.ok {
				progressFrom(ctx)(operationView(run.finished))
				return run.finished, nil
			}
			break wait
		case <-changed:
			if cur, err := s.store.OperationByID(ctx, op.ID); err == nil && !operationDone(cur) && progressOf(cur) != last {
				last = progressOf(cur)
				progressFrom(ctx)(operationView(cur))
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			return op, nil
		}
	}
	cur, err := s.store.OperationByID(ctx, op.ID)
	if err != nil {
		return op, err
	}
	if operationDone(cur) {
		progressFrom(ctx)(operationView(cur))
	}
	return cur, nil
}
