package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%s: %v (%T), want store.ErrUnavailable", what, err, err)
	}
	if d := wire.DetailOf(err); d.Code != wire.CodeUnavailable {
		t.Fatalf("%s: wire code %q, want %q", what, d.Code, wire.CodeUnavailable)
	}
}

func TestOpenWithNoServerIsUnavailable(t *testing.T) {
	// A socket directory where no server listens.
	_, err := store.Open(t.Context(), "postgres://postgres@/berth?sslmode=disable&host="+t.TempDir())
	wantUnavailable(t, "open", err)
	if !strings.Contains(err.Error(), "connect to database") {
		t.Errorf("error %q does not say what failed", err)
	}
}

// TestOutageIsUnavailableAndPasses cuts a store's database off (every
// session terminated, no new one accepted): store calls and transactions
// fail with ErrUnavailable, and work again once the database is back.
func TestOutageIsUnavailableAndPasses(t *testing.T) {
	s := storetest.New(t)
	u := mustUser(t, s, "outage")
	ctx := context.Background()

	restore := storetest.CutOff(t, s)
	for i := range 3 { // the first call meets the terminated sessions, later ones new connection attempts
		_, err := s.UserByID(ctx, u.ID)
		wantUnavailable(t, fmt.Sprintf("UserByID call %d", i+1), err)
	}
	err := s.InTx(ctx, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT 1`); return err })
	wantUnavailable(t, "InTx", err)
	_, err = s.Pool.Exec(ctx, `SELECT 1`)
	wantUnavailable(t, "Classify(direct pool use)", store.Classify(err))

	restore()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.UserByID(ctx, u.ID)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the database came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClassifyLeavesOtherErrorsAlone: only connection failures are
// unavailable; what the database said about a statement keeps its kind.
func TestClassifyLeavesOtherErrorsAlone(t *testing.T) {
	s := storetest.New(t)
	if store.Classify(nil) != nil {
		t.Fatal("Classify(nil) is not nil")
	}
	_, err := s.UserByName(t.Context(), "nobody")
	if got := store.Classify(err); !errors.Is(got, store.ErrNotFound) || errors.Is(got, store.ErrUnavailable) {
		t.Fatalf("not found became %v", got)
	}
	_, err = s.Pool.Exec(t.Context(), `SELECT no_such_column FROM users`)
	if got := store.Classify(err); errors.Is(got, store.ErrUnavailable) || got != err {
		t.Fatalf("a bad statement became %v", got)
	}
	if got := store.Classify(context.Canceled); got != context.Canceled {
		t.Fatalf("a cancelled context became %v", got)
	}
}
