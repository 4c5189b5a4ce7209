// Package store owns berth's PostgreSQL access: the connection pool,
// schema migrations (the goose files in /migrations) and the queries for
// users, tokens, role bindings and the audit log. Errors it returns carry
// wire codes (ErrNotFound, ErrConflict, ErrInvalid) so the HTTP layer can
// answer without inspecting driver errors.
package store

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is a handle on berth's database. Pool is exported so code that
// needs a query the store does not offer can run it, preferably through
// InTx.
type Store struct {
	Pool *pgxpool.Pool
}

// Open connects to the database at url and checks that it answers. The
// returned error names the url with its password hidden.
func Open(ctx context.Context, url string) (*Store, error) {
	return OpenTraced(ctx, url, nil)
}

// OpenTraced is Open with tracer (when not nil) seeing every query of
// every connection; it may also be a pgx.BatchTracer. Tests count the
// round trips a call makes with it (storetest.Counter).
func OpenTraced(ctx context.Context, url string, tracer pgx.QueryTracer) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's own message already avoids quoting the password.
		return nil, fmt.Errorf("open database %s: %w", RedactURL(url), err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without a bound a firewalled host hangs the server's start.
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "berth"
	}
	// Each replica keeps two connections busy for good (the operation
	// listener and the watcher lock) besides its request traffic, so the
	// pgx default of max(4, CPUs) is too small unless the URL sets one.
	if !strings.Contains(url, "pool_max_conns") && cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", RedactURL(url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s: %w", RedactURL(url), Classify(err))
	}
	return &Store{Pool: pool}, nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() { s.Pool.Close() }

var (
	keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	queryPassword   = regexp.MustCompile(`(?i)([?&]password=)[^&#]*`)
)

// RedactURL returns a database URL or keyword/value connection string fit
// for logs and error messages: the password is replaced by "xxxxx", also
// in URLs that do not parse.
func RedactURL(s string) string {
	scheme, rest, isURL := strings.Cut(s, "://")
	if !isURL || (scheme != "postgres" && scheme != "postgresql") {
		return keywordPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if u, err := url.Parse(s); err == nil {
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	// Unparsable: cut the password out of user:password@ by hand.
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if colon := strings.Index(authority[:at], ":"); colon >= 0 {
			rest = rest[:colon+1] + "xxxxx" + rest[at:]
		}
	}
	return scheme + "://" + queryPassword.ReplaceAllString(rest, "${1}xxxxx")
}

// ConnHost is the database server's host (a name, an address or a unix
// socket's directory) and port.
func (s *Store) ConnHost() (string, uint16) {
	c := s.Pool.Config().ConnConfig
	return c.Host, c.Port
}
