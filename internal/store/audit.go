package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
	"github.com/jackc/pgx/v5"
)

// Audit outcomes.
const (
	OutcomeOK     = "ok"
	OutcomeDenied = "denied"
	OutcomeError  = "error"
)

// AuditEntry is one line of the audit log. Detail must never hold secrets:
// the store keeps whatever it is given.
type AuditEntry struct {
	ID         int64 // set by the store
	At         time.Time
	ActorID    string
	Actor      string
	TokenID    string
	Action     string
	TargetKind string
	TargetID   string
	Namespace  string
	Outcome    string
	Detail     map[string]any
}

// AuditFilter selects audit entries; empty fields match everything.
type AuditFilter struct {
	ActorID string
	Action  string
	// Actions, when set, matches entries of any of these actions.
	Actions    []string
	TargetKind string
	TargetID   string
	Namespace  string
	// Since and Until bound the entries' times (Since inclusive, Until
	// exclusive); zero means unbounded.
	Since, Until time.Time
	// BeforeID, when > 0, returns only entries older than that id: the
	// cursor of the next page.
	BeforeID int64
	// Limit caps the number of entries, newest first; 0 means
	// DefaultAuditLimit and values above MaxAuditLimit are lowered.
	Limit int
}

// Limits of ListAudit.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// Audit appends e to the audit log. A zero At means now.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	for _, id := range []struct{ name, v string }{{"actor_id", e.ActorID}, {"token_id", e.TokenID}} {
		if id.v != "" && !IsUUID(id.v) {
			return wire.Errorf(wire.CodeBadRequest, "audit %s: %s %q is not a uuid", e.Action, id.name, id.v)
		}
	}
	var at any
	if !e.At.IsZero() {
		at = e.At
	}
	var detail any
	if e.Detail != nil {
		detail = e.Detail
	}
	// The commit does not wait for the disk: an entry is written on every
	// exec and forward, and only a crash of PostgreSQL itself in the
	// following fraction of a second could lose one.
	err := s.execNoSync(ctx, `
		INSERT INTO audit_log (at, actor_id, actor, token_id, action, target_kind, target_id, namespace, outcome, detail)
		VALUES (coalesce($1, now()), $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		at, nullUUID(e.ActorID), e.Actor, nullUUID(e.TokenID), e.Action, e.TargetKind, e.TargetID, e.Namespace, e.Outcome, detail)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, mapError(err))
	}
	return nil
}

// ListAudit returns audit entries matching f, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	limit = min(limit, MaxAuditLimit)
	if f.ActorID != "" && !IsUUID(f.ActorID) {
		return []AuditEntry{}, nil
	}
	// The filter is built per call rather than with "$1 = '' OR ..." so
	// that the planner can use the actor, action, target and namespace
	// indexes, each ordered by id as the pages are.
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	for _, c := range []struct{ col, v string }{
		{"actor_id", f.ActorID}, {"action", f.Action}, {"target_kind", f.TargetKind}, {"target_id", f.TargetID}, {"namespace", f.Namespace},
	} {
		if c.v != "" {
			add(c.col+" = $%d", c.v)
		}
	}
	if len(f.Actions) > 0 {
		add("action = ANY($%d)", f.Actions)
	}
	if !f.Since.IsZero() {
		add("at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("at < $%d", f.Until)
	}
	if f.BeforeID > 0 {
		add("id < $%d", f.BeforeID)
	}
	cond := ""
	if len(where) > 0 {
		cond = "WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	rows, err := s.Pool.Query(ctx, fmt.Sprintf(`
		SELECT id, at, coalesce(actor_id::text, ''), actor, coalesce(token_id::text, ''), action,
			target_kind, target_id, namespace, outcome, detail
		FROM audit_log %s
		ORDER BY id DESC
		LIMIT $%d`, cond, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", mapError(err))
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.ActorID, &e.Actor, &e.TokenID, &e.Action,
			&e.TargetKind, &e.TargetID, &e.Namespace, &e.Outcome, &e.Detail)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", mapError(err))
	}
	return entries, nil
}
