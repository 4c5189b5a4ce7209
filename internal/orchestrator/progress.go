package orchestrator

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// ProgressFunc is told each new state of an operation a call is waiting
// for (wait_seconds), so an adapter can report progress to its caller, for
// example as MCP notifications/progress.
type ProgressFunc func(Operation)

type progressKey struct{}

// WithProgress returns a context whose waiting calls report to fn.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func progressFrom(ctx context.Context) ProgressFunc {
	fn, _ := ctx.Value(progressKey{}).(ProgressFunc)
	if fn == nil {
		return func(Operation) {}
	}
	return fn
}

// Stage turns an operation status into a progress fraction in [0, 1] for
// callers that report percentages; a running operation that records its
// progress (a start pulling its image) moves from 0.5 to 0.9 with it, so
// the fraction never goes back.
func Stage(op Operation) float64 {
	switch op.Status {
	case OpScheduled:
		return 0.1
	case OpInProgress:
		if op.Progress != nil {
			return 0.5 + 0.4*op.Progress.Fraction()
		}
		return 0.5
	default:
		return 1
	}
}

// Describe says in a line what a waiter is told of op: its type and
// status, and its progress when it records one.
func Describe(op Operation) string {
	s := op.Type + " " + op.Status
	if op.Progress != nil && op.Status == OpInProgress {
		s += ": " + op.Progress.String()
	}
	return s
}

// progressInterval is the least time between two writes of an
// operation's progress: a pull reports every megabyte, and each write is
// a database update and a notification to every replica.
const progressInterval = 500 * time.Millisecond

type operationKey struct{}

// withOperation marks ctx as the context of running operation id, whose
// progress bringUp records.
func withOperation(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, operationKey{}, id)
}

// recordProgress returns a runtime.Spec.Progress that records a running
// operation's progress in its row (when ctx is an operation's, see
// withOperation) at most every progressInterval, from a goroutine of its
// own so that the runtime's reports never wait for the database; and a
// stop that writes the last report and waits for that goroutine.
func (s *Service) recordProgress(ctx context.Context) (report func(runtime.Progress), stop func()) {
	id, _ := ctx.Value(operationKey{}).(string)
	if id == "" {
		return nil, func() {}
	}
	var (
		mu     sync.Mutex
		latest *runtime.Progress
	)
	wake, quit, done := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	write := func() {
		mu.Lock()
		p := latest
		latest = nil
		mu.Unlock()
		if p == nil {
			return
		}
		b, _ := json.Marshal(p)
		// Progress is for watchers: a failed write is not the start's.
		if err := s.store.SetOperationProgress(context.WithoutCancel(ctx), id, b); err != nil {
			s.log.Debug("record an operation's progress", "operation_id", id, "err", err)
		}
	}
	go func() {
		defer close(done)
		for {
			select {
			case <-wake:
				write()
			case <-quit:
				write()
				return
			}
			select {
			case <-time.After(progressInterval):
			case <-quit:
				write()
				return
			}
		}
	}()
	report = func(p runtime.Progress) {
		mu.Lock()
		latest = &p
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	return report, func() { close(quit); <-done }
}

// progressOf is what a waiter reports of op: its status and progress,
// which change together or apart.
func progressOf(op store.Operation) string { return op.Status + " " + string(op.Progress) }
