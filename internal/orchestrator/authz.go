package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
)

// authorize asks rbac and records refused mutating calls in the audit log.
// Reads that are refused are not audited: they change nothing and would
// flood the log.
func (s *Service) authorize(ctx context.Context, p rbac.Principal, a rbac.Action, r rbac.Resource, targetID string) error {
	err := rbac.Authorize(p, a, r)
	if err != nil && rbac.RequiredScope(a) != rbac.ScopeRead {
		s.audit(ctx, p, string(a), r.Kind, targetID, r.Namespace, "denied", map[string]any{"reason": err.Error()})
	}
	return err
}

// audit writes one audit entry. A failure to audit is logged, not
// returned: the call it records already happened.
func (s *Identity) audit(ctx context.Context, p rbac.Principal, action, kind, id, ns, outcome string, detail map[string]any) {
	err := s.store.Audit(context.WithoutCancel(ctx), store.AuditEntry{
		ActorID: p.UserID, Actor: p.Username, TokenID: p.TokenID, Action: action,
		TargetKind: kind, TargetID: id, Namespace: ns, Outcome: outcome, Detail: detail,
	})
	if err != nil {
		s.log.Error("write audit log", "action", action, "target", id, "err", err)
	}
}

// outcome names how a call ended, for the audit log.
func outcome(err error) string {
	var d *rbac.Denied
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &d):
		return "denied"
	default:
		return "error"
	}
}

// requireScope checks only the token's scope for a, for calls such as
// listings that span namespaces: each item is then authorized on its own.
func requireScope(p rbac.Principal, a rbac.Action) error {
	need := rbac.RequiredScope(a)
	if rbac.HasScope(p.Scopes, need) {
		return nil
	}
	return &rbac.Denied{MissingScopes: []rbac.Scope{need}, Reason: fmt.Sprintf("token lacks scope %q", need)}
}
