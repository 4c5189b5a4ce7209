// Package storetest gives tests throwaway PostgreSQL databases with
// berth's schema. The migrations are applied once per migration content
// to a template database (berth_tpl_<hash>), and each test database is a
// cheap CREATE DATABASE ... TEMPLATE copy of it, dropped when the test
// ends.
//
// The server is found through BERTH_TEST_DATABASE_URL (a postgres:// URL of
// a database the tests may connect to as a role allowed to create
// databases), by default the local cluster that `make postgres` starts.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvURL names the environment variable holding the test server's URL.
const EnvURL = "BERTH_TEST_DATABASE_URL"

// DefaultURL is used when EnvURL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLock is the session advisory lock key, in the maintenance
// database, that serializes template builds across test processes.
const templateLock int64 = 0x62657274_74706c00 // "berttpl"

// New returns a Store on a fresh database with all migrations applied. The
// store is closed and the database dropped when the test ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	return Open(t, URL(t))
}

// Open returns a Store on the database at url (from URL: replicas of one
// test share a database), closed when the test ends; opened after URL,
// its close runs before URL's drop.
func Open(t testing.TB, url string) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL returns the URL of a fresh database with all migrations applied, for
// tests that hand it to a server process. The database is dropped when the
// test ends, whoever is still connected.
func URL(t testing.TB) string {
	t.Helper()
	base := baseURL()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, t, base)
	defer admin.Close(context.WithoutCancel(ctx))

	tpl, err := ensureTemplate(ctx, admin, base)
	if err != nil {
		t.Fatalf("storetest: template database: %v", err)
	}
	name := "berth_test_" + randomHex(8)
	if err := createFromTemplate(ctx, admin, name, tpl); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(base, name); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return withDatabase(base, name)
}

// EmptyURL returns the URL of a fresh database without any migration
// applied, for tests of the migrations themselves. It is dropped when the
// test ends.
func EmptyURL(t testing.TB) string {
	t.Helper()
	base := baseURL()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, t, base)
	defer admin.Close(context.WithoutCancel(ctx))
	name := "berth_test_" + randomHex(8)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(base, name); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return withDatabase(base, name)
}

func baseURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

func connectAdmin(ctx context.Context, t testing.TB, base string) *pgx.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("storetest: %s must be a postgres:// URL, got %s", EnvURL, store.RedactURL(base))
	}
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvURL, err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("storetest: PostgreSQL is not reachable at %s: %v\n"+
			"Start it with `make postgres`, or point %s at a server where this role may create databases.",
			store.RedactURL(base), err, EnvURL)
	}
	return conn
}

// migrationHash identifies the migration content: a template built from
// other files must not be reused.
func migrationHash() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// completeMarker is the template database's comment once every migration
// has been applied; a template without it is a leftover of a build that
// died half-way.
func completeMarker(hash string) string { return "berth storetest template " + hash + " complete" }

// ensureTemplate returns the name of the migrated template database for
// the current migrations, building it when missing.
func ensureTemplate(ctx context.Context, admin *pgx.Conn, base string) (string, error) {
	hash, err := migrationHash()
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	name := "berth_tpl_" + hash
	if ok, err := templateComplete(ctx, admin, name, hash); err != nil || ok {
		return name, err
	}
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLock); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer admin.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLock)
	// Another process may have built it while this one waited.
	if ok, err := templateComplete(ctx, admin, name, hash); err != nil || ok {
		return name, err
	}
	if err := buildTemplate(ctx, admin, base, name, hash); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return name, nil
}

func templateComplete(ctx context.Context, admin *pgx.Conn, name, hash string) (bool, error) {
	var comment *string
	err := admin.QueryRow(ctx, `
		SELECT shobj_description(oid, 'pg_database') FROM pg_database
		WHERE datname = $1 AND datistemplate`, name).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", name, err)
	}
	return comment != nil && *comment == completeMarker(hash), nil
}

func buildTemplate(ctx context.Context, admin *pgx.Conn, base, name, hash string) error {
	ident := pgx.Identifier{name}.Sanitize()
	// A half-built leftover: a template must be unmarked before it can be dropped.
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+ident+` WITH IS_TEMPLATE false`); err != nil && !isCode(err, "3D000") {
		return err
	}
	if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+ident); err != nil {
		return err
	}
	s, err := store.Open(ctx, withDatabase(base, name))
	if err != nil {
		return err
	}
	err = s.Migrate(ctx)
	s.Close()
	if err != nil {
		return err
	}
	// No connections allowed: CREATE DATABASE ... TEMPLATE fails while
	// anyone is connected to the template.
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+ident+` WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`); err != nil {
		return err
	}
	_, err = admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %s IS '%s'`, ident, completeMarker(hash)))
	return err
}

func createFromTemplate(ctx context.Context, admin *pgx.Conn, name, tpl string) error {
	sql := fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, pgx.Identifier{name}.Sanitize(), pgx.Identifier{tpl}.Sanitize())
	_, err := admin.Exec(ctx, sql)
	if err != nil {
		return fmt.Errorf("create database %s from %s: %w", name, tpl, err)
	}
	return nil
}

func dropDatabase(base, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("drop database %s: connect: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// withDatabase returns base pointing at database name. base has been
// checked by connectAdmin; should it not parse, the empty result fails the
// connection that uses it with a clear error.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

func isCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
