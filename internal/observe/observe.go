// Package observe owns the hooks through which berth's layers report the
// work they do (an HTTP request, a tool call, an operation run, a runtime
// call, a command in a sandbox) to what measures it (internal/metrics,
// internal/tracing, internal/httplog), so those layers depend on neither.
// Every hook is optional: a nil one costs a nil check.
package observe

import (
	"context"
	"net/http"
)

// Done ends one unit of work with its error (nil = it succeeded).
type Done func(err error)

// Start begins one unit of work of a kind bound beforehand, returning the
// context the work runs in (a span's) and how to end it.
type Start func(ctx context.Context) (context.Context, Done)

// Hook binds one name of a bounded set (a tool, an operation type, a
// runtime method) once and returns how to start work of it, so the
// measuring side can look its labels up at binding rather than per call.
type Hook func(name string) Start

func noopDone(error) {}

func noopStart(ctx context.Context) (context.Context, Done) { return ctx, noopDone }

// Bind binds name; a nil hook binds to a start that does nothing.
func (h Hook) Bind(name string) Start {
	if h == nil {
		return noopStart
	}
	if s := h(name); s != nil {
		return s
	}
	return noopStart
}

// Join runs every non-nil hook, in order, around the same work: the
// first one's context is the second one's parent.
func Join(hooks ...Hook) Hook {
	var hs []Hook
	for _, h := range hooks {
		if h != nil {
			hs = append(hs, h)
		}
	}
	switch len(hs) {
	case 0:
		return nil
	case 1:
		return hs[0]
	}
	return func(name string) Start {
		starts := make([]Start, len(hs))
		for i, h := range hs {
			starts[i] = h.Bind(name)
		}
		return JoinStarts(starts...)
	}
}

// JoinStarts runs every non-nil start around the same work, ending them
// in reverse order.
func JoinStarts(starts ...Start) Start {
	var ss []Start
	for _, s := range starts {
		if s != nil {
			ss = append(ss, s)
		}
	}
	switch len(ss) {
	case 0:
		return noopStart
	case 1:
		return ss[0]
	}
	return func(ctx context.Context) (context.Context, Done) {
		dones := make([]Done, len(ss))
		for i, s := range ss {
			ctx, dones[i] = s(ctx)
		}
		return ctx, func(err error) {
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](err)
			}
		}
	}
}

// Hooks are what the orchestrator reports; any may be nil.
type Hooks struct {
	// Operation is around each run of an operation by a worker, bound
	// by operation type.
	Operation Hook
	// Exec is around a command's run by a sandbox's agent, bound by kind:
	// "session" (a persistent shell) or "command" (run_bash_command).
	Exec Hook
	// Agent is around each request berth sends to a sandbox's agent.
	Agent Start
	// Inject writes the caller's trace context into a request to an
	// agent (W3C traceparent), so the agent's work joins the trace.
	Inject func(ctx context.Context, h http.Header)
	// WarmClaim reports a start that could take a warm-pool server: hit
	// when it did.
	WarmClaim func(hit bool)
	// Egress counts a sandbox's connection or lookup through the egress
	// gateway: reason "" when allowed, else the rule that refused it (a
	// short fixed phrase, never the destination).
	Egress func(reason string)
}

// JoinHooks combines hooks of several observers.
func JoinHooks(hs ...Hooks) Hooks {
	var out Hooks
	var agents []Start
	var injects []func(context.Context, http.Header)
	var claims []func(bool)
	var egress []func(string)
	var ops, execs []Hook
	for _, h := range hs {
		ops, execs = append(ops, h.Operation), append(execs, h.Exec)
		if h.Agent != nil {
			agents = append(agents, h.Agent)
		}
		if h.Inject != nil {
			injects = append(injects, h.Inject)
		}
		if h.WarmClaim != nil {
			claims = append(claims, h.WarmClaim)
		}
		if h.Egress != nil {
			egress = append(egress, h.Egress)
		}
	}
	out.Operation, out.Exec = Join(ops...), Join(execs...)
	if len(agents) > 0 {
		out.Agent = JoinStarts(agents...)
	}
	if len(injects) > 0 {
		out.Inject = func(ctx context.Context, h http.Header) {
			for _, f := range injects {
				f(ctx, h)
			}
		}
	}
	if len(claims) > 0 {
		out.WarmClaim = func(hit bool) {
			for _, f := range claims {
				f(hit)
			}
		}
	}
	if len(egress) > 0 {
		out.Egress = func(reason string) {
			for _, f := range egress {
				f(reason)
			}
		}
	}
	return out
}
