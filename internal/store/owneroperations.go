package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// OperationCursor is where a page of a user's operations continues: the
// last operation of the previous page.
type OperationCursor struct {
	CreatedAt time.Time
	ID        string
}

// OperationFilter narrows a user's operations; empty fields match all.
type OperationFilter struct {
	Status, Type, ServerID string
}

// OwnerOperations returns up to limit operations of one user that match
// f, newest first, starting after the cursor (the zero cursor starts at
// the newest). Ties on created_at are broken by id, so a page never
// repeats or skips an operation.
func (s *Store) OwnerOperations(ctx context.Context, ownerID string, f OperationFilter, after OperationCursor, limit int) ([]Operation, error) {
	if !IsUUID(ownerID) || (f.ServerID != "" && !IsUUID(f.ServerID)) {
		return []Operation{}, nil
	}
	var since, server any
	if !after.CreatedAt.IsZero() {
		since = after.CreatedAt
	}
	if f.ServerID != "" {
		server = f.ServerID
	}
	rows, err := s.Pool.Query(ctx, `SELECT `+operationColumns+` FROM operations
		WHERE owner_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id::text) < ($2, $3))
		AND ($5 = '' OR status = $5) AND ($6 = '' OR type = $6) AND ($7::uuid IS NULL OR server_id = $7)
		ORDER BY created_at DESC, id::text DESC LIMIT $4`, ownerID, since, after.ID, limit, f.Status, f.Type, server)
	if err != nil {
		return nil, mapError(err)
	}
	return collectOperations(rows)
}

// collectOperations reads every operation of rows and closes them.
func collectOperations(rows pgx.Rows) ([]Operation, error) {
	defer rows.Close()
	out := []Operation{}
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, rows.Err()
}
