package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/wire"
)

// Operation is a row of operations. Result is JSON text.
type Operation struct {
	ID       string  `json:"id"`
	Type     string  `json:"type"`
	Status   string  `json:"status"`
	ServerID string  `json:"server_id,omitempty"`
	Result   *string `json:"result"`
	Error    string  `json:"error,omitempty"`
	// ErrorCode is the code of a failed operation's error (see
	// wire.ErrorDetail): bad_request when the agent refused a command,
	// bad_gateway when a sandbox answered nonsense, and so on.
	ErrorCode string    `json:"error_code,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Progress is how far a running operation is, as it recorded it
	// (SetOperationProgress): JSON, nil when it said nothing.
	Progress []byte `json:"-"`
	// TaskTTLMs is the ttl granted the operation as an MCP task
	// (SetOperationTaskTTL), nil when it is none.
	TaskTTLMs *int64 `json:"-"`

	OwnerID      string `json:"-"`
	Namespace    string `json:"-"`
	Params       []byte `json:"-"`
	ParamsSealed []byte `json:"-"`
	Attempts     int    `json:"-"`
}

const operationColumns = `id::text, type, status, coalesce(server_id::text, ''), result, error, error_code, created_at, updated_at,
	coalesce(owner_id::text, ''), namespace, params, params_sealed, attempts, progress, task_ttl_ms`

func scanOperation(row interface{ Scan(...any) error }) (Operation, error) {
	var o Operation
	err := row.Scan(&o.ID, &o.Type, &o.Status, &o.ServerID, &o.Result, &o.Error, &o.ErrorCode, &o.CreatedAt, &o.UpdatedAt,
		&o.OwnerID, &o.Namespace, &o.Params, &o.ParamsSealed, &o.Attempts, &o.Progress, &o.TaskTTLMs)
	return o, err
}

// SetOperationTaskTTL records the ttl granted operation id, owned by
// ownerID, as an MCP task.
func (s *Store) SetOperationTaskTTL(ctx context.Context, id, ownerID string, ttlMs int64) error {
	tag, err := s.Pool.Exec(ctx, `UPDATE operations SET task_ttl_ms = $3 WHERE id = $1 AND owner_id = $2`, id, ownerID, ttlMs)
	if err != nil {
		return fmt.Errorf("operation %s task ttl: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("operation %s task ttl: no such operation of %s", id, ownerID)
	}
	return nil
}

// maxProgressBytes bounds an operation's recorded progress: a step and a
// few counts.
const maxProgressBytes = 4 << 10

// SetOperationProgress records how far a running operation is (JSON),
// which its waiters are told of. It changes nothing once the operation
// ended.
func (s *Store) SetOperationProgress(ctx context.Context, id string, progress []byte) error {
	if len(progress) > maxProgressBytes {
		return fmt.Errorf("operation %s progress: %d bytes, over %d", id, len(progress), maxProgressBytes)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE operations SET progress = $2 WHERE id = $1 AND status = 'IN_PROGRESS'`, id, progress); err != nil {
		return fmt.Errorf("operation %s progress: %w", id, mapError(err))
	}
	return nil
}

// NewOperation is an operation to schedule.
type NewOperation struct {
	Type, OwnerID, Namespace, ServerID string
	Params                             []byte // JSON
	ParamsSealed                       []byte
	// Result, when set, records the operation SUCCEEDED with it: the
	// work was done by the call that inserts it.
	Result *string
	// ClaimFor, when set, inserts the operation already claimed for its
	// first attempt by that replica (see LeaseHolder) for Lease: the
	// inserting call runs it at once instead of waiting for a worker.
	ClaimFor string
	Lease    time.Duration
}

// InsertOperation schedules an operation inside tx. The insert trigger
// announces it to every replica's workers.
func InsertOperation(ctx context.Context, tx pgx.Tx, n NewOperation) (Operation, error) {
	sql, args := insertOperation(n)
	op, err := scanOperation(tx.QueryRow(ctx, sql+` RETURNING `+operationColumns, args...))
	if err != nil {
		return Operation{}, fmt.Errorf("schedule %s: %w", n.Type, mapError(err))
	}
	return op, nil
}

// insertOperation is the statement that inserts n, and its arguments
// ($1 to $9).
func insertOperation(n NewOperation) (string, []any) {
	if n.Params == nil {
		n.Params = []byte("{}")
	}
	var claim any
	if n.ClaimFor != "" && n.Result == nil {
		claim = LeaseHolder(n.ClaimFor, 1)
	}
	return `INSERT INTO operations (type, owner_id, namespace, server_id, params, params_sealed,
			result, status, finished_at, attempts, lease_owner, lease_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7,
			CASE WHEN $7::text IS NOT NULL THEN 'SUCCEEDED' WHEN $8::text IS NOT NULL THEN 'IN_PROGRESS' ELSE 'SCHEDULED' END,
			CASE WHEN $7::text IS NULL THEN NULL ELSE now() END,
			CASE WHEN $8::text IS NULL THEN 0 ELSE 1 END,
			$8, CASE WHEN $8::text IS NULL THEN NULL ELSE now() + $9::interval END)`,
		[]any{n.Type, nullUUID(n.OwnerID), n.Namespace, nullUUID(n.ServerID), n.Params, n.ParamsSealed, n.Result, claim, n.Lease}
}

// InsertAuditedOperation schedules an operation and appends the audit
// entry that records it in one statement: one round trip and one durable
// commit, where a transaction would take three and a separate audit one
// more. The entry's detail gains "operation_id". The insert trigger
// announces the operation as InsertOperation's does.
func (s *Store) InsertAuditedOperation(ctx context.Context, n NewOperation, e AuditEntry) (Operation, error) {
	if e.ActorID != "" && !IsUUID(e.ActorID) || e.TokenID != "" && !IsUUID(e.TokenID) {
		return Operation{}, wire.Errorf(wire.CodeBadRequest, "audit %s: actor_id and token_id must be uuids, got %q and %q", e.Action, e.ActorID, e.TokenID)
	}
	sql, args := insertOperation(n)
	detail := e.Detail
	if detail == nil {
		detail = map[string]any{}
	}
	args = append(args, nullUUID(e.ActorID), e.Actor, nullUUID(e.TokenID), e.Action, e.TargetKind, e.TargetID, e.Namespace, e.Outcome, detail)
	op, err := scanOperation(s.Pool.QueryRow(ctx, `WITH op AS (`+sql+` RETURNING *),
		entry AS (INSERT INTO audit_log (at, actor_id, actor, token_id, action, target_kind, target_id, namespace, outcome, detail)
			SELECT now(), $10, $11, $12, $13, $14, $15, $16, $17, $18::jsonb || jsonb_build_object('operation_id', op.id::text) FROM op)
		SELECT `+operationColumns+` FROM op`, args...))
	if err != nil {
		return Operation{}, fmt.Errorf("schedule %s: %w", n.Type, mapError(err))
	}
	return op, nil
}

// OperationByID returns one operation.
func (s *Store) OperationByID(ctx context.Context, id string) (Operation, error) {
	if !IsUUID(id) {
		return Operation{}, notFound("operation %q not found", id)
	}
	op, err := scanOperation(s.Pool.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, id))
	if err != nil {
		return Operation{}, rowError(err, "operation", id)
	}
	return op, nil
}

// PendingOperation returns the newest operation of the type on the
// server that is scheduled or in progress, inside tx; false when there
// is none.
func PendingOperation(ctx context.Context, tx pgx.Tx, serverID, opType string) (Operation, bool, error) {
	op, err := scanOperation(tx.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations
		WHERE server_id = $1 AND type = $2 AND status IN ('SCHEDULED', 'IN_PROGRESS') ORDER BY created_at DESC LIMIT 1`, serverID, opType))
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("pending %s of server %s: %w", opType, serverID, mapError(err))
	}
	return op, true, nil
}

// ListOperations returns the latest operations of a server (for
// debugging), newest first; with types, only operations of those types.
func (s *Store) ListOperations(ctx context.Context, serverID string, limit int, types ...string) ([]Operation, error) {
	query, args := `SELECT `+operationColumns+` FROM operations WHERE server_id = $1`, []any{serverID, limit}
	if len(types) > 0 {
		query += ` AND type = ANY($3)`
		args = append(args, types)
	}
	rows, err := s.Pool.Query(ctx, query+` ORDER BY created_at DESC LIMIT $2`, args...)
	if err != nil {
		return nil, mapError(err)
	}
	return collectOperations(rows)
}

// LeaseHolder names the holder of one claim of an operation: the replica
// and the attempt. A replica that claims its own operation again after
// the lease expired (its renewals were late) thus does not share the
// lease with its earlier claim, which loses it as another replica's
// would.
func LeaseHolder(replica string, attempt int) string { return fmt.Sprintf("%s/%d", replica, attempt) }

// ClaimOperation takes the oldest operation that is scheduled, or in
// progress under a lease that expired (its replica died), and leases it
// to replica for this attempt (LeaseHolder). Only operations of no server,
// or on a server whose sandbox the replica's runtime owner may act on
// (ActsOn), are taken: another host's sandbox is out of this replica's
// reach, so its operations wait for a replica of its owner (the owner
// itself, restarted, on the local runtime). It returns false when there
// is nothing to do.
func (s *Store) ClaimOperation(ctx context.Context, replica, runtimeOwner string, lease time.Duration) (Operation, bool, error) {
	op, err := scanOperation(s.Pool.QueryRow(ctx, `UPDATE operations SET status = 'IN_PROGRESS', attempts = attempts + 1,
			lease_owner = $1::text || '/' || (attempts + 1), lease_expires_at = now() + $2::interval, updated_at = now()
		WHERE id = (SELECT o.id FROM operations o LEFT JOIN servers s ON s.id = o.server_id
			WHERE (o.status = 'SCHEDULED' OR (o.status = 'IN_PROGRESS' AND o.lease_expires_at < now()))
				AND ($3 = '' OR s.id IS NULL OR s.runtime_owner IN ('', $3))
			ORDER BY o.created_at LIMIT 1 FOR UPDATE OF o SKIP LOCKED)
		RETURNING `+operationColumns, replica, lease, runtimeOwner))
	if err == pgx.ErrNoRows {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("claim operation: %w", mapError(err))
	}
	return op, true, nil
}

// UnclaimOperation gives back a claim that was never acted on (its
// replica began shutting down just as it claimed), as if the claim had
// not happened, so another replica takes it at once.
func (s *Store) UnclaimOperation(ctx context.Context, id, holder string) error {
	_, err := s.Pool.Exec(ctx, `UPDATE operations SET status = 'SCHEDULED', attempts = attempts - 1,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE id = $1 AND lease_owner = $2 AND status = 'IN_PROGRESS'`, id, holder)
	return mapError(err)
}

// RenewLease extends a lease (owner as named by LeaseHolder); false means
// the lease was lost (the operation was taken over or finished
// elsewhere).
func (s *Store) RenewLease(ctx context.Context, id, owner string, lease time.Duration) (bool, error) {
	tag, err := s.Pool.Exec(ctx, `UPDATE operations SET lease_expires_at = now() + $3::interval
		WHERE id = $1 AND lease_owner = $2 AND status = 'IN_PROGRESS'`, id, owner, lease)
	if err != nil {
		return false, mapError(err)
	}
	return tag.RowsAffected() == 1, nil
}

// FinishOperation records the final status of an operation owner (as
// named by LeaseHolder) holds.
// An empty owner finishes it regardless of the lease (the watcher failing
// stuck work). errCode and errMsg are those of a failed operation's
// error. It reports whether the row was updated.
func (s *Store) FinishOperation(ctx context.Context, id, owner, status string, result *string, errCode, errMsg string) (bool, error) {
	_, ok, err := s.FinishedOperation(ctx, Operation{ID: id}, owner, status, result, errCode, errMsg)
	return ok, err
}

// FinishedOperation is FinishOperation for op that also returns op as
// finished, so that a caller waiting for it needs no second read. Only
// the update time comes back from the database: a result can be
// megabytes, which the caller holds already.
func (s *Store) FinishedOperation(ctx context.Context, op Operation, owner, status string, result *string, errCode, errMsg string) (Operation, bool, error) {
	err := s.Pool.QueryRow(ctx, `UPDATE operations SET status = $3, result = $4, error_code = $5, error = $6, updated_at = now(),
			finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND status IN ('SCHEDULED', 'IN_PROGRESS') AND ($2 = '' OR lease_owner = $2)
		RETURNING updated_at`,
		op.ID, owner, status, result, errCode, errMsg).Scan(&op.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Operation{}, false, nil
	case err != nil:
		return Operation{}, false, mapError(err)
	}
	op.Status, op.Result, op.ErrorCode, op.Error = status, result, errCode, errMsg
	return op, true, nil
}

// StuckOperations returns operations that were scheduled before
// scheduledBefore and never picked up, or whose lease expired after
// maxAttempts attempts.
func (s *Store) StuckOperations(ctx context.Context, scheduledBefore time.Time, maxAttempts int) ([]Operation, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+operationColumns+` FROM operations
		WHERE (status = 'SCHEDULED' AND created_at < $1)
		   OR (status = 'IN_PROGRESS' AND lease_expires_at < now() AND attempts >= $2)
		LIMIT 100`, scheduledBefore, maxAttempts)
	if err != nil {
		return nil, mapError(err)
	}
	return collectOperations(rows)
}

// execNoSync runs one statement in a transaction whose commit does not wait
// for the disk (one round trip), for bookkeeping whose loss in a database
// crash is harmless: activity times.
func (s *Store) execNoSync(ctx context.Context, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit TO OFF`)
	b.Queue(sql, args...)
	b.Queue(`COMMIT`)
	br := s.Pool.SendBatch(ctx, b)
	defer br.Close()
	for range 4 {
		if _, err := br.Exec(); err != nil {
			return mapError(err)
		}
	}
	return nil
}

// AppendJSON appends o as wire.Marshal encodes it, built at its final
// size: a result can be megabytes of JSON (command output), which
// encoding/json would grow its buffer to step by step (see
// wire.AppendString). wire.WriteJSON uses it.
func (o Operation) AppendJSON(b []byte) ([]byte, error) {
	if o.Result == nil {
		whole, err := wire.Marshal(o)
		return append(b, whole...), err
	}
	small := o
	small.Result = nil
	rest, err := wire.Marshal(small)
	if err != nil {
		return nil, err
	}
	// Strings in the JSON have their quotes escaped, so this can only be
	// the field itself.
	const field = `"result":null`
	i := bytes.Index(rest, []byte(field))
	if i < 0 {
		return nil, fmt.Errorf("encode operation %s: no result field in %.100s", o.ID, rest)
	}
	// One byte more for the newline WriteJSON ends with.
	b = slices.Grow(b, len(rest)-len("null")+wire.StringLen(*o.Result)+1)
	b = append(b, rest[:i+len(`"result":`)]...)
	b = wire.AppendString(b, *o.Result)
	return append(b, rest[i+len(field):]...), nil
}
