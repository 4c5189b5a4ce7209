package store_test

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/migrations"
)

// Two replicas starting together on a fresh database must both succeed,
// one applying the migrations and the other finding them applied.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := storetest.EmptyURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	stores := make([]*store.Store, 2)
	for i := range stores {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	s := stores[0]
	files, _ := fs.Glob(migrations.FS, "*.sql")
	if n := count(t, s, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`); n != len(files) {
		t.Fatalf("goose_db_version has %d migrations, want %d (each applied once)", n, len(files))
	}
	for _, table := range []string{"users", "session_tokens", "role_bindings", "audit_log"} {
		if n := count(t, s, `SELECT count(*) FROM information_schema.tables WHERE table_name = $1`, table); n != 1 {
			t.Errorf("table %s: found %d times", table, n)
		}
	}
	// The schema works, and migrating again is a no-op.
	mustUser(t, s, "first")
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM users`); n != 1 {
		t.Fatalf("%d users after re-migrating, want 1", n)
	}
}

func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "postgres://berth:s3cretpw@127.0.0.1:1/berth?sslmode=disable")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error does not name the server: %v", err)
	}
	_, err = store.Open(ctx, "postgres://berth:s3cretpw@127.0.0.1:notaport/berth")
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("bad URL: error %v (must exist and not leak the password)", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable":    "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgresql://u@h/db?password=pw&sslmode=none": "postgresql://u@h/db?password=xxxxx&sslmode=none",
		"host=h user=u password=pw dbname=db":          "host=h user=u password=xxxxx dbname=db",
		"host=h password='p w\\'x' dbname=db":          "host=h password=xxxxx dbname=db",
		"postgres://u@h/db":                            "postgres://u@h/db",
		"postgres://u:p@ss@h:bad/db?password=x&a=b":    "postgres://u:xxxxx@h:bad/db?password=xxxxx&a=b",
	} {
		if got := store.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
