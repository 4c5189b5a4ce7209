package store

import (
	"context"
	"fmt"
)

// ServerCount is how many servers are in one state; Warm counts those of
// them that wait in a warm pool, Unhealthy those whose agent fails its
// health checks.
type ServerCount struct {
	Status    string
	Total     int
	Warm      int
	Unhealthy int
}

// ServerCounts counts the servers by state, for every replica to report
// the same figures (metrics).
func (s *Store) ServerCounts(ctx context.Context) ([]ServerCount, error) {
	rows, err := s.Pool.Query(ctx, `SELECT status, count(*), count(*) FILTER (WHERE warm),
		count(*) FILTER (WHERE unhealthy_since IS NOT NULL AND status IN ('RUNNING', 'FINISHED'))
		FROM servers GROUP BY status ORDER BY status`)
	if err != nil {
		return nil, fmt.Errorf("count servers: %w", mapError(err))
	}
	defer rows.Close()
	var out []ServerCount
	for rows.Next() {
		var c ServerCount
		if err := rows.Scan(&c.Status, &c.Total, &c.Warm, &c.Unhealthy); err != nil {
			return nil, fmt.Errorf("count servers: %w", mapError(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count servers: %w", mapError(err))
	}
	return out, nil
}
