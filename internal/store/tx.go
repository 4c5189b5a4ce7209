package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txAttempts bounds how often InTx runs fn when PostgreSQL reports a
// serialization failure or a deadlock.
const txAttempts = 4

// InTx runs fn in a transaction and commits when fn returns nil. When
// PostgreSQL aborts the transaction with a serialization failure or a
// deadlock, fn runs again in a new transaction (a few times, with a short
// random backoff), so fn must not have side effects outside tx. Constraint
// violations in the returned error are mapped like the store's own errors.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = s.runTx(ctx, fn)
		if err == nil || !retryable(err) || attempt == txAttempts {
			return mapError(err)
		}
		backoff := time.Duration(attempt) * time.Duration(5+rand.IntN(20)) * time.Millisecond
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retry stopped: %w)", mapError(err), ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Store) runTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer func() {
		if err != nil {
			// The rollback error says nothing the caller needs; a broken
			// connection is discarded by the pool anyway.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func retryable(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	return pg.Code == "40001" || pg.Code == "40P01" // serialization_failure, deadlock_detected
}
