package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// raise makes PostgreSQL itself fail the transaction with code.
func raise(ctx context.Context, tx pgx.Tx, code string) error {
	_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'forced failure' USING ERRCODE = '`+code+`'; END $$`)
	return err
}

func TestInTxRetriesSerializationFailures(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	calls := 0
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		calls++
		if _, err := tx.Exec(ctx, `INSERT INTO users (username) VALUES ($1)`, "try"+string(rune('0'+calls))); err != nil {
			return err
		}
		if calls == 1 {
			return raise(ctx, tx, "40001")
		}
		if calls == 2 {
			return raise(ctx, tx, "40P01")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("InTx: err %v after %d calls, want success on the third", err, calls)
	}
	// Only the committed attempt's row exists.
	if n := count(t, s, `SELECT count(*) FROM users`); n != 1 {
		t.Fatalf("%d users, want 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM users WHERE username = 'try3'`); n != 1 {
		t.Fatal("the committed row is not the last attempt's")
	}
}

func TestInTxGivesUp(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	calls := 0
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		calls++
		return raise(ctx, tx, "40001")
	})
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "40001" {
		t.Fatalf("err %v, want the serialization failure", err)
	}
	if calls < 2 || calls > 10 {
		t.Fatalf("%d attempts, want a few", calls)
	}
}

func TestInTxRollsBackAndMapsErrors(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	mine := errors.New("mine")
	calls := 0
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		calls++
		if _, err := tx.Exec(ctx, `INSERT INTO users (username) VALUES ('x')`); err != nil {
			return err
		}
		return mine
	})
	if !errors.Is(err, mine) || calls != 1 {
		t.Fatalf("err %v after %d calls, want mine after 1", err, calls)
	}
	if n := count(t, s, `SELECT count(*) FROM users`); n != 0 {
		t.Fatal("InTx committed although fn failed")
	}

	mustUser(t, s, "taken")
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO users (username) VALUES ('taken')`)
		return err
	})
	wantCode(t, err, wire.CodeConflict, "username")
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("%v is not ErrConflict", err)
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Fatalf("driver error lost from the chain: %v", err)
	}
}
