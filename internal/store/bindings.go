package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subject kinds of a Binding.
const (
	SubjectUser  = "user"
	SubjectGroup = "group"
)

// Binding gives a role to a user (Subject is the user id) or a group
// (Subject is the group name) in one namespace, or in every namespace
// when Namespace is "".
type Binding struct {
	ID          string
	SubjectKind string
	Subject     string
	Role        string
	Namespace   string
	CreatedAt   time.Time
	CreatedBy   string
}

const bindingColumns = `id::text, subject_kind, subject, role, namespace, created_at, created_by`

func scanBinding(row pgx.Row) (Binding, error) {
	var b Binding
	err := row.Scan(&b.ID, &b.SubjectKind, &b.Subject, &b.Role, &b.Namespace, &b.CreatedAt, &b.CreatedBy)
	return b, err
}

func collectBindings(rows pgx.Rows) ([]Binding, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Binding, error) { return scanBinding(r) })
}

// Grant binds b.Role to b's subject in b.Namespace, recording by as its
// author. Granting an existing binding is not an error: the existing one
// is returned. A user subject must be the id of an existing user.
func (s *Store) Grant(ctx context.Context, b Binding, by string) (Binding, error) {
	if b.SubjectKind == SubjectUser {
		if _, err := s.UserByID(ctx, b.Subject); err != nil {
			return Binding{}, fmt.Errorf("grant %s: %w", b.Role, err)
		}
	}
	out, err := grant(ctx, s.Pool, b, by)
	if err != nil {
		return Binding{}, fmt.Errorf("grant %s: %w", b.Role, err)
	}
	return out, nil
}

// grant inserts the binding or returns the existing one. In READ
// COMMITTED a binding committed by a concurrent grant after this
// statement's snapshot is invisible to the fallback SELECT, so the
// statement is tried again; the next snapshot sees it.
func grant(ctx context.Context, q querier, b Binding, by string) (Binding, error) {
	for range 3 {
		out, err := scanBinding(q.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO role_bindings (subject_kind, subject, role, namespace, created_by)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (subject_kind, subject, role, namespace) DO NOTHING
				RETURNING `+bindingColumns+`
			)
			SELECT * FROM ins
			UNION ALL
			SELECT `+bindingColumns+` FROM role_bindings
			WHERE subject_kind = $1 AND subject = $2 AND role = $3 AND namespace = $4
			LIMIT 1`,
			b.SubjectKind, b.Subject, b.Role, b.Namespace, by))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return Binding{}, mapError(err)
		}
		return out, nil
	}
	return Binding{}, fmt.Errorf("binding %s %s %s in %q kept changing concurrently", b.SubjectKind, b.Subject, b.Role, b.Namespace)
}

// Revoke removes the binding with b's subject kind, subject, role and
// namespace (b.ID is ignored); ErrNotFound when there is none.
func (s *Store) Revoke(ctx context.Context, b Binding) error {
	tag, err := s.Pool.Exec(ctx, `
		DELETE FROM role_bindings
		WHERE subject_kind = $1 AND subject = $2 AND role = $3 AND namespace = $4`,
		b.SubjectKind, b.Subject, b.Role, b.Namespace)
	if err != nil {
		return fmt.Errorf("revoke %s: %w", b.Role, mapError(err))
	}
	if tag.RowsAffected() == 0 {
		return notFound("no binding of role %q to %s %q in namespace %q", b.Role, b.SubjectKind, b.Subject, b.Namespace)
	}
	return nil
}

// BindingsFor returns the bindings that apply to a user: those of the user
// id and those of any of groups.
func (s *Store) BindingsFor(ctx context.Context, userID string, groups []string) ([]Binding, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT `+bindingColumns+` FROM role_bindings
		WHERE (subject_kind = 'user' AND subject = $1)
		   OR (subject_kind = 'group' AND subject = ANY ($2))
		ORDER BY namespace, role, subject_kind, subject`, userID, nonNil(groups))
	if err != nil {
		return nil, fmt.Errorf("bindings for user %s: %w", userID, mapError(err))
	}
	bs, err := collectBindings(rows)
	if err != nil {
		return nil, fmt.Errorf("bindings for user %s: %w", userID, mapError(err))
	}
	return bs, nil
}

// ListBindings returns every binding.
func (s *Store) ListBindings(ctx context.Context) ([]Binding, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+bindingColumns+` FROM role_bindings ORDER BY subject_kind, subject, namespace, role`)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", mapError(err))
	}
	bs, err := collectBindings(rows)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", mapError(err))
	}
	return bs, nil
}
