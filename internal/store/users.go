package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// User is a person or service known to berth.
type User struct {
	ID          string
	Username    string
	Email       string
	DisplayName string
	Groups      []string
	CreatedAt   time.Time
	Disabled    bool
}

// NewUser is what an identity provider tells about a user.
type NewUser struct {
	Username    string
	Email       string
	DisplayName string
	Groups      []string
}

// querier is what both the pool and a transaction offer, so a query helper
// can run inside or outside InTx.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const userColumns = `id::text, username, email, display_name, groups, created_at, disabled_at IS NOT NULL`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Username, &u.Email, &u.DisplayName, &u.Groups, &u.CreatedAt, &u.Disabled)
	return u, err
}

// firstUserLock is the transaction advisory lock key that serializes user
// creation, so that of two users created at once only one sees an empty
// table and becomes the first (admin) user.
const firstUserLock int64 = 0x62657274_75736572 // "bertuser"

// EnsureUser returns the user with u.Username, creating it when missing.
// Usernames are case-insensitive: they are stored lower-case.
//
// A new user is bound, in the transaction that creates it, to firstRole in
// every namespace when no user existed before, else to defaultRole in
// defaultNamespace ("" is every namespace); an empty role binds nothing.
// Creations are serialized with an advisory lock so two concurrent first
// users cannot both become first. created reports whether the user was
// made. An existing user gets its email, display name and groups replaced
// by those of u that are non-empty.
func (s *Store) EnsureUser(ctx context.Context, u NewUser, firstRole, defaultRole, defaultNamespace string) (user User, created bool, err error) {
	u.Username = strings.ToLower(strings.TrimSpace(u.Username))
	u.Groups = normalizeGroups(u.Groups)
	cur, err := scanUser(s.Pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE username = $1`, u.Username))
	if err == nil {
		user, err = s.refreshUser(ctx, cur, u)
		return user, false, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return User{}, false, fmt.Errorf("ensure user %q: %w", u.Username, mapError(err))
	}
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		created = false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, firstUserLock); err != nil {
			return err
		}
		// Another creation may have committed while this one waited.
		var err error
		user, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE username = $1`, u.Username))
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var first bool
		if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM users)`).Scan(&first); err != nil {
			return err
		}
		user, err = scanUser(tx.QueryRow(ctx,
			`INSERT INTO users (username, email, display_name, groups) VALUES ($1, $2, $3, $4) RETURNING `+userColumns,
			u.Username, u.Email, u.DisplayName, nonNil(u.Groups)))
		if err != nil {
			return err
		}
		role, ns, by := defaultRole, defaultNamespace, "system:new-user"
		if first {
			role, ns, by = firstRole, "", "system:first-user"
		}
		if role != "" {
			b := Binding{SubjectKind: SubjectUser, Subject: user.ID, Role: role, Namespace: ns}
			if _, err := grant(ctx, tx, b, by); err != nil {
				return fmt.Errorf("bind role %q: %w", role, err)
			}
		}
		created = true
		return nil
	})
	if err != nil {
		return User{}, false, fmt.Errorf("ensure user %q: %w", u.Username, err)
	}
	if !created {
		user, err = s.refreshUser(ctx, user, u)
	}
	return user, created, err
}

// refreshUser stores the non-empty fields of u that differ from cur.
func (s *Store) refreshUser(ctx context.Context, cur User, u NewUser) (User, error) {
	email := cmp.Or(u.Email, cur.Email)
	name := cmp.Or(u.DisplayName, cur.DisplayName)
	groups := cur.Groups
	if len(u.Groups) > 0 {
		groups = u.Groups
	}
	if email == cur.Email && name == cur.DisplayName && slices.Equal(groups, cur.Groups) {
		return cur, nil
	}
	user, err := scanUser(s.Pool.QueryRow(ctx,
		`UPDATE users SET email = $2, display_name = $3, groups = $4, updated_at = now() WHERE id = $1 RETURNING `+userColumns,
		cur.ID, email, name, nonNil(groups)))
	if err != nil {
		return User{}, fmt.Errorf("update user %q: %w", cur.Username, mapError(err))
	}
	return user, nil
}

// normalizeGroups trims, drops empty names and duplicates and sorts, so
// that an unchanged group list compares equal and causes no write.
func normalizeGroups(groups []string) []string {
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// UserByID returns the user with that id.
func (s *Store) UserByID(ctx context.Context, id string) (User, error) {
	if !IsUUID(id) {
		return User{}, notFound("user %q not found", id)
	}
	u, err := scanUser(s.Pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, notFound("user %s not found", id)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %s: %w", id, mapError(err))
	}
	return u, nil
}

// UserByName returns the user with that username (case-insensitive).
func (s *Store) UserByName(ctx context.Context, username string) (User, error) {
	username = strings.ToLower(strings.TrimSpace(username))
	u, err := scanUser(s.Pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE username = $1`, username))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, notFound("user %q not found", username)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %q: %w", username, mapError(err))
	}
	return u, nil
}

// ListUsers returns every user, ordered by username.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+userColumns+` FROM users ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", mapError(err))
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
	if err != nil {
		return nil, fmt.Errorf("list users: %w", mapError(err))
	}
	return users, nil
}

// SetUserDisabled disables or re-enables a user. A disabled user's tokens
// stop working (TokenByHash answers ErrUserDisabled) but stay listed.
func (s *Store) SetUserDisabled(ctx context.Context, id string, disabled bool) (User, error) {
	if !IsUUID(id) {
		return User{}, notFound("user %q not found", id)
	}
	u, err := scanUser(s.Pool.QueryRow(ctx, `
		UPDATE users SET
			disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END,
			updated_at = now()
		WHERE id = $1 RETURNING `+userColumns, id, disabled))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, notFound("user %s not found", id)
	}
	if err != nil {
		return User{}, fmt.Errorf("set user %s disabled: %w", id, mapError(err))
	}
	return u, nil
}
