package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ShellSession is a row of shell_sessions: the server berth started for a
// user's session key, in a client it registered for it.
type ShellSession struct {
	OwnerID     string
	Key         string
	ClientID    string
	ServerID    string
	OperationID string
	CreatedAt   time.Time
}

const shellSessionColumns = `owner_id::text, session_key, client_id::text, server_id::text, coalesce(operation_id::text, ''), created_at`

func scanShellSession(row pgx.Row) (ShellSession, error) {
	var ss ShellSession
	err := row.Scan(&ss.OwnerID, &ss.Key, &ss.ClientID, &ss.ServerID, &ss.OperationID, &ss.CreatedAt)
	return ss, err
}

// ShellSession returns the owner's session of that key, or ErrNotFound.
func (s *Store) ShellSession(ctx context.Context, ownerID, key string) (ShellSession, error) {
	return shellSession(ctx, s.Pool, ownerID, key)
}

// LockedShellSession takes a transaction lock on the owner's session key
// and then reads its row, inside tx: of two first calls for one session,
// on any replicas, the second waits here until the first committed the
// session it made, and then finds it.
func LockedShellSession(ctx context.Context, tx pgx.Tx, ownerID, key string) (ShellSession, bool, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('berth shell session ' || $1::text || ' ' || $2::text, 0))`,
		ownerID, key); err != nil {
		return ShellSession{}, false, fmt.Errorf("lock session %s: %w", key, mapError(err))
	}
	// Its own statement, so its snapshot is taken after the lock is held.
	ss, err := shellSession(ctx, tx, ownerID, key)
	if err == nil {
		return ss, true, nil
	}
	if errors.Is(err, ErrNotFound) {
		return ShellSession{}, false, nil
	}
	return ShellSession{}, false, err
}

func shellSession(ctx context.Context, q querier, ownerID, key string) (ShellSession, error) {
	ss, err := scanShellSession(q.QueryRow(ctx, `SELECT `+shellSessionColumns+` FROM shell_sessions
		WHERE owner_id = $1 AND session_key = $2`, ownerID, key))
	if err != nil {
		return ShellSession{}, rowError(err, "session", key)
	}
	return ss, nil
}

// PutShellSession records the session, replacing the one of the same
// owner and key, inside tx (which holds LockedShellSession's lock).
func PutShellSession(ctx context.Context, tx pgx.Tx, ss ShellSession) (ShellSession, error) {
	out, err := scanShellSession(tx.QueryRow(ctx, `INSERT INTO shell_sessions (owner_id, session_key, client_id, server_id, operation_id)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (owner_id, session_key) DO UPDATE SET client_id = $3, server_id = $4, operation_id = $5, created_at = now()
		RETURNING `+shellSessionColumns, ss.OwnerID, ss.Key, ss.ClientID, ss.ServerID, nullUUID(ss.OperationID)))
	if err != nil {
		return ShellSession{}, fmt.Errorf("record session %s: %w", ss.Key, mapError(err))
	}
	return out, nil
}

// DeleteShellSession removes the owner's session of that key when it
// still names serverID, and reports whether it did: a session that a
// later call gave a new server meanwhile stays.
func (s *Store) DeleteShellSession(ctx context.Context, ownerID, key, serverID string) (bool, error) {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM shell_sessions WHERE owner_id = $1 AND session_key = $2 AND server_id = $3`,
		ownerID, key, serverID)
	if err != nil {
		return false, fmt.Errorf("delete session %s: %w", key, mapError(err))
	}
	return tag.RowsAffected() > 0, nil
}

// ShellSessionOfServer returns the session whose server is serverID, if
// any.
func (s *Store) ShellSessionOfServer(ctx context.Context, serverID string) (ShellSession, bool, error) {
	if !IsUUID(serverID) {
		return ShellSession{}, false, nil
	}
	ss, err := scanShellSession(s.Pool.QueryRow(ctx, `SELECT `+shellSessionColumns+` FROM shell_sessions WHERE server_id = $1`, serverID))
	if err == pgx.ErrNoRows {
		return ShellSession{}, false, nil
	}
	if err != nil {
		return ShellSession{}, false, fmt.Errorf("session of server %s: %w", serverID, mapError(err))
	}
	return ss, true, nil
}

// InsertClient inserts a client inside tx.
func InsertClient(ctx context.Context, tx pgx.Tx, ownerID, name, namespace string) (Client, error) {
	return insertClient(ctx, tx, ownerID, name, namespace, 0)
}
