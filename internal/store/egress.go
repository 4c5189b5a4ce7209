package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/egress"
)

// maxRefusalsKept bounds a server's egress_refusals rows: a sandbox that
// is refused in a loop cannot grow the table.
const maxRefusalsKept = 50

// SetServerNetwork sets a server's egress policy.
func SetServerNetwork(ctx context.Context, tx pgx.Tx, id string, p egress.Policy) (Server, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return Server{}, fmt.Errorf("server %s network: %w", id, err)
	}
	srv, err := scanServer(tx.QueryRow(ctx, `UPDATE servers SET network = $2, updated_at = now() WHERE id = $1 RETURNING `+serverColumns, id, b))
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// ServerEgress is what the egress gateway reads of a server.
type ServerEgress struct {
	Policy egress.Policy
	Bytes  int64
	Status string
}

// GetServerEgress reads a server's egress policy and byte count.
func (s *Store) GetServerEgress(ctx context.Context, id string) (ServerEgress, error) {
	var out ServerEgress
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT network, egress_bytes, status FROM servers WHERE id = $1`, id).Scan(&raw, &out.Bytes, &out.Status)
	if err != nil {
		return out, fmt.Errorf("server %s egress: %w", id, mapError(err))
	}
	if err := json.Unmarshal(raw, &out.Policy); err != nil {
		return out, fmt.Errorf("server %s network: %w", id, err)
	}
	return out, nil
}

// SetEgressBytes records the bytes a server's sandbox moved through the
// gateway; a smaller count than the one recorded is ignored (two replicas
// in turn, or a late write).
func (s *Store) SetEgressBytes(ctx context.Context, id string, n int64) error {
	_, err := s.Pool.Exec(ctx, `UPDATE servers SET egress_bytes = $2 WHERE id = $1 AND egress_bytes < $2`, id, n)
	if err != nil {
		return fmt.Errorf("server %s egress bytes: %w", id, mapError(err))
	}
	return nil
}

// EgressRefusal is a refused connection of a server's sandbox.
type EgressRefusal struct {
	At      time.Time `json:"at"`
	Name    string    `json:"name,omitempty"`
	Address string    `json:"address,omitempty"`
	Reason  string    `json:"reason"`
	Count   int       `json:"count"`
}

// AddEgressRefusals records refusals of a server's sandbox, keeping only
// the newest maxRefusalsKept.
func (s *Store) AddEgressRefusals(ctx context.Context, serverID string, rs []EgressRefusal) error {
	if len(rs) == 0 {
		return nil
	}
	return s.InTx(ctx, func(tx pgx.Tx) error {
		for _, r := range rs {
			if _, err := tx.Exec(ctx, `INSERT INTO egress_refusals (server_id, at, name, address, reason, count)
				VALUES ($1, $2, $3, $4, $5, $6)`, serverID, r.At, r.Name, r.Address, r.Reason, max(r.Count, 1)); err != nil {
				return fmt.Errorf("record egress refusal of server %s: %w", serverID, mapError(err))
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM egress_refusals WHERE server_id = $1 AND id <= (
			SELECT id FROM egress_refusals WHERE server_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, serverID, maxRefusalsKept)
		if err != nil {
			return fmt.Errorf("trim egress refusals of server %s: %w", serverID, mapError(err))
		}
		return nil
	})
}

// ListEgressRefusals returns a server's newest refusals, newest first.
func (s *Store) ListEgressRefusals(ctx context.Context, serverID string, limit int) ([]EgressRefusal, error) {
	rows, err := s.Pool.Query(ctx, `SELECT at, name, address, reason, count FROM egress_refusals
		WHERE server_id = $1 ORDER BY id DESC LIMIT $2`, serverID, limit)
	if err != nil {
		return nil, fmt.Errorf("egress refusals of server %s: %w", serverID, mapError(err))
	}
	defer rows.Close()
	out := []EgressRefusal{}
	for rows.Next() {
		var r EgressRefusal
		if err := rows.Scan(&r.At, &r.Name, &r.Address, &r.Reason, &r.Count); err != nil {
			return nil, fmt.Errorf("egress refusals of server %s: %w", serverID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
