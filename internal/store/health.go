package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServersToCheck returns the servers whose agent should answer health
// checks: running and finished ones (warm ones included), which have a
// sandbox and an endpoint.
func (s *Store) ServersToCheck(ctx context.Context) ([]Server, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+serverColumns+` FROM servers
		WHERE status IN ('RUNNING', 'FINISHED') AND endpoint IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("servers to check: %w", mapError(err))
	}
	out, err := collectServers(rows)
	if err != nil {
		return nil, fmt.Errorf("servers to check: %w", err)
	}
	return out, nil
}

// MarkUnhealthy records a failed health check of a running or finished
// server's agent with what it said, and returns how long its checks have
// been failing, by the database's clock (every replica's watcher reads
// the same), and whether this check was the first to fail. A server in
// another state by now is ErrConflict.
func (s *Store) MarkUnhealthy(ctx context.Context, id, msg string) (time.Duration, bool, error) {
	var secs float64
	var first bool
	err := s.Pool.QueryRow(ctx, `UPDATE servers s SET unhealthy_since = coalesce(o.was, now()), health_error = $2
		FROM (SELECT id, unhealthy_since AS was FROM servers WHERE id = $1 FOR UPDATE) o
		WHERE s.id = o.id AND s.status IN ('RUNNING', 'FINISHED')
		RETURNING extract(epoch FROM now() - s.unhealthy_since)::float8, o.was IS NULL`, id, msg).Scan(&secs, &first)
	if err == pgx.ErrNoRows {
		return 0, false, newError(ErrConflict, "server %s is no longer running", id)
	}
	if err != nil {
		return 0, false, fmt.Errorf("mark server %s unhealthy: %w", id, mapError(err))
	}
	return time.Duration(secs * float64(time.Second)), first, nil
}

// MarkHealthy records that a server's agent answers its health checks
// again.
func (s *Store) MarkHealthy(ctx context.Context, id string) error {
	_, err := s.Pool.Exec(ctx, `UPDATE servers SET unhealthy_since = NULL, health_error = ''
		WHERE id = $1 AND unhealthy_since IS NOT NULL`, id)
	if err != nil {
		return fmt.Errorf("mark server %s healthy: %w", id, mapError(err))
	}
	return nil
}
