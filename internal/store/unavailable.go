package store

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/berth-mcp/berth/internal/wire"
)

// ErrUnavailable: the database cannot be reached or takes no connections
// for now (wire.CodeUnavailable): PostgreSQL is down, restarting or
// failing over, or the pool is closed. Such a failure says nothing about
// the request, so the HTTP layers answer 503 with Retry-After; the pool
// reconnects by itself once the database is back.
var ErrUnavailable error = &kindError{code: wire.CodeUnavailable, msg: "database unavailable"}

// UnavailableMessage is what a client is told when the database is
// unavailable; the driver's details (addresses, user and database names)
// are for the log.
const UnavailableMessage = "berth's database is unavailable; retry in a few seconds"

// Classify returns err as an ErrUnavailable error when it is a connection
// failure, and err itself otherwise. Code that queries the pool directly
// (rather than through a Store method) calls it before the error becomes
// an answer.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !connectionFailure(err) {
		return err
	}
	return &kindError{code: wire.CodeUnavailable, msg: "database unavailable: " + err.Error(), kind: ErrUnavailable, cause: err}
}

// connectionFailure reports whether err says PostgreSQL could not be
// reached or dropped the session, rather than that it refused a statement.
// Every failed connection attempt is one: refused, timed out, or turned
// away by the server (starting up, too many clients, not accepting
// connections to this database); so is a session the server ended because
// it shut down or an administrator terminated it.
func connectionFailure(err error) bool {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.Is(err, puddle.ErrClosedPool) {
		return true
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	switch pg.Code {
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	case "53300": // too_many_connections
		return true
	}
	return strings.HasPrefix(pg.Code, "08") // connection_exception
}
