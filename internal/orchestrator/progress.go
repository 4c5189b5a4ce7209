package orchestrator

import "context"

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
// callers that report percentages.
func Stage(op Operation) float64 {
	switch op.Status {
	case OpScheduled:
		return 0.1
	case OpInProgress:
		return 0.5
	default:
		return 1
	}
}
