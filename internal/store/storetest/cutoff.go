package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/store"
)

// CutOff makes the database of s (one of New's or URL's) unavailable to
// every client, as a PostgreSQL outage would be, without stopping the
// server other tests share: the database stops accepting connections and
// every session it has is terminated. restore lets connections in again;
// it also runs when the test ends.
func CutOff(t testing.TB, s *store.Store) (restore func()) {
	t.Helper()
	name := s.Pool.Config().ConnConfig.Database
	ident := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, t, baseURL())
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS false`); err != nil {
		t.Fatalf("storetest: refuse connections to %s: %v", name, err)
	}
	// pg_terminate_backend only signals: wait until every session is gone.
	for {
		var left int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&left)
		if err != nil {
			t.Fatalf("storetest: terminate the sessions of %s: %v", name, err)
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("storetest: %d sessions of %s outlived their termination", left, name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			admin := connectAdmin(ctx, t, baseURL())
			defer admin.Close(ctx)
			if _, err := admin.Exec(ctx, `ALTER DATABASE `+ident+` WITH ALLOW_CONNECTIONS true`); err != nil {
				t.Errorf("storetest: let connections to %s in again: %v", name, err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
