package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestClaimReusableWaitsForABriefLock: a finished server locked for a
// moment by a writer that is not a claim (a health check marking it) is
// still handed to a RESET, which waits for the lock rather than start a
// new server; a second claim then finds none.
func TestClaimReusableWaitsForABriefLock(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	u := mustUser(t, s, "alice")
	c, err := s.CreateClient(ctx, u.ID, "c", "default", 0)
	if err != nil {
		t.Fatal(err)
	}
	var srv store.Server
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		srv, err = store.InsertServer(ctx, tx, store.NewServer{ClientID: c.ID, OwnerID: u.ID, Namespace: "default", ServerName: "s",
			ImageTag: "base", ReuseKey: "key", Status: "FINISHED"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	locker, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// However the test ends, the lock goes: an open transaction would
	// hold the test database's cleanup.
	defer locker.Rollback(ctx)
	if _, err := locker.Exec(ctx, `SELECT 1 FROM servers WHERE id = $1 FOR UPDATE`, srv.ID); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan store.Server, 1)
	go func() {
		var got store.Server
		s.InTx(ctx, func(tx pgx.Tx) error {
			got, _, err = store.ClaimReusable(ctx, tx, u.ID, "key", c.ID, false, store.Started{}, "")
			return err
		})
		claimed <- got
	}()
	// The claim waits on the lock: give it the time to reach it, then let go.
	waitUntil(t, func() bool {
		return count(t, s, `SELECT count(*) FROM pg_locks WHERE NOT granted`) > 0
	})
	locker.Commit(ctx)
	select {
	case got := <-claimed:
		if got.ID != srv.ID {
			t.Fatalf("claimed %q, want the finished server %s", got.ID, srv.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not end")
	}
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		_, ok, err := store.ClaimReusable(ctx, tx, u.ID, "key", c.ID, false, store.Started{}, "")
		if ok {
			t.Error("a second claim took the same server")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
