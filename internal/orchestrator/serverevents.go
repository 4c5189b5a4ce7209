package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// A server's recent events, as get_server shows them: what happened to it
// (who started, finished, restarted or stopped it, when berth found it
// failed, why), its lifecycle operations, and the runtime's own events
// (a pod's, on Kubernetes), newest first. Commands and file calls are
// left out: they are the audit log's, and would bury the rest.

const maxServerEvents = 30

// lifecycleOps are the operation types that change a server's state.
var lifecycleOps = []string{opStartServer, opRestartServer, opRecoverServer, opWarmServer, opStopServer}

// recordFailure audits a server berth found failed, with why, so the
// failure stays in its events after a restart replaces its error.
func (s *Service) recordFailure(ctx context.Context, srv store.Server, why string) {
	// berth acts on its own here: no user, and its name as the actor.
	s.audit(ctx, rbac.Principal{Username: "berth"}, "server.failed", "server", srv.ID, srv.Namespace, "error", map[string]any{"reason": why})
}

// serverEvents gathers srv's recent events. Each source is best effort:
// a server whose events cannot be read now is still readable.
func (s *Service) serverEvents(ctx context.Context, srv store.Server) []runtime.Event {
	var out []runtime.Event
	if r, ok := runtime.As[runtime.EventReporter](s.rt); ok {
		evs, err := r.Events(ctx, srv.ID)
		if err != nil {
			s.log.Warn("sandbox events", "server_id", srv.ID, "err", err)
		}
		out = append(out, evs...)
	}
	// Filtered in the query: a server's commands and file calls would
	// otherwise fill any page of its entries and hide its lifecycle.
	entries, err := s.store.ListAudit(ctx, store.AuditFilter{TargetKind: "server", TargetID: srv.ID, Actions: lifecycleActions, Limit: maxServerEvents})
	if err != nil {
		s.log.Warn("server audit events", "server_id", srv.ID, "err", err)
	}
	for _, e := range entries {
		ev := runtime.Event{Time: e.At, Type: "Normal", Reason: e.Action, Message: e.Actor + " " + strings.TrimPrefix(e.Action, "server.")}
		if e.Outcome != store.OutcomeOK {
			ev.Type = "Warning"
			ev.Message += " (" + e.Outcome + ")"
		}
		if why, ok := e.Detail["reason"].(string); ok {
			ev.Message += ": " + why
		}
		out = append(out, ev)
	}
	// Only lifecycle operations, in the query: a server's commands are
	// operations too, many and with results of megabytes.
	ops, err := s.store.ListOperations(ctx, srv.ID, maxServerEvents, lifecycleOps...)
	if err != nil {
		s.log.Warn("server operation events", "server_id", srv.ID, "err", err)
	}
	for _, op := range ops {
		ev := runtime.Event{Time: op.UpdatedAt, Type: "Normal", Reason: op.Type, Message: fmt.Sprintf("operation %s %s", op.ID, op.Status)}
		if op.Status == OpFailed {
			ev.Type = "Warning"
			ev.Message += ": " + op.Error
		}
		out = append(out, ev)
	}
	out = append(out, s.egressEvents(ctx, srv)...)
	slices.SortStableFunc(out, func(a, b runtime.Event) int { return b.Time.Compare(a.Time) })
	return out[:min(len(out), maxServerEvents)]
}

// lifecycleActions are the audit actions that change a server's state,
// as opposed to the commands and file calls run in it.
var lifecycleActions = []string{"server.start", "server.finish", "server.restart", "server.stop", "server.failed", "server.unhealthy", "server.network"}
