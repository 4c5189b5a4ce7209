package storetest_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/migrations"
	"github.com/jackc/pgx/v5"
)

func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), adminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func adminURL() string {
	if u := os.Getenv(storetest.EnvURL); u != "" {
		return u
	}
	return storetest.DefaultURL
}

func currentDatabase(t *testing.T, s *store.Store) string {
	t.Helper()
	var name string
	if err := s.Pool.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestDatabasesAreIsolatedAndDropped(t *testing.T) {
	var names []string
	t.Run("use", func(t *testing.T) {
		a, b := storetest.New(t), storetest.New(t)
		names = []string{currentDatabase(t, a), currentDatabase(t, b)}
		if names[0] == names[1] {
			t.Fatalf("both stores use database %s", names[0])
		}
		if _, _, err := a.EnsureUser(t.Context(), store.NewUser{Username: "alice"}, "admin", "member", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := b.UserByName(t.Context(), "alice"); err == nil {
			t.Fatal("a user created in one test database is visible in another")
		}
		for _, n := range names {
			if !databaseExists(t, n) {
				t.Fatalf("database %s does not exist while in use", n)
			}
		}
	})
	for _, n := range names {
		if databaseExists(t, n) {
			t.Errorf("database %s still exists after its test ended", n)
		}
	}
}

func TestURLIsMigrated(t *testing.T) {
	url := storetest.URL(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var applied int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Fatalf("%d migrations applied, want %d", applied, len(files))
	}
	for _, table := range []string{"users", "session_tokens", "role_bindings", "audit_log"} {
		var ok bool
		if err := conn.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s missing (err %v)", table, err)
		}
	}
}

func TestEmptyURLHasNoSchema(t *testing.T) {
	conn, err := pgx.Connect(t.Context(), storetest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass('users') IS NULL`).Scan(&ok); err != nil || !ok {
		t.Fatalf("empty database has a users table (err %v)", err)
	}
}

// Many tests asking for databases at once share one template and each get
// their own copy.
func TestParallelNew(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	for range 6 {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			s := storetest.New(t)
			name := currentDatabase(t, s)
			mu.Lock()
			defer mu.Unlock()
			if seen[name] {
				t.Errorf("database %s handed out twice", name)
			}
			seen[name] = true
		})
	}
}

// fatalRecorder captures Fatal calls of the code under test and stops its
// goroutine like testing.T does.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func TestUnreachableServerFailsWithHowToStart(t *testing.T) {
	// Port 1 on loopback refuses connections at once.
	t.Setenv(storetest.EnvURL, "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable")
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		storetest.URL(rec)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.msg == "" {
		t.Fatal("URL returned without failing the test")
	}
	if !strings.Contains(rec.msg, "make postgres") {
		t.Errorf("message does not say how to start PostgreSQL: %s", rec.msg)
	}
	if strings.Contains(rec.msg, "hunter2") {
		t.Errorf("message leaks the password: %s", rec.msg)
	}
}
