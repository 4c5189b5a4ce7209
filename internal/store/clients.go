package store

import (
	"context"
	"fmt"
	"time"
)

// Client is a row of clients. Its JSON form is the API's.
type Client struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Namespace       string    `json:"namespace"`
	NodesCount      int       `json:"nodes_count"`
	Status          string    `json:"status"`
	OwnerID         string    `json:"owner_id"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
}

const clientColumns = `id::text, name, namespace, nodes_count, status, owner_id::text, created_at, updated_at, last_heartbeat_at`

func scanClient(row interface{ Scan(...any) error }) (Client, error) {
	var c Client
	err := row.Scan(&c.ID, &c.Name, &c.Namespace, &c.NodesCount, &c.Status, &c.OwnerID, &c.CreatedAt, &c.UpdatedAt, &c.LastHeartbeatAt)
	return c, err
}

// CreateClient inserts a client.
func (s *Store) CreateClient(ctx context.Context, ownerID, name, namespace string, nodes int) (Client, error) {
	return insertClient(ctx, s.Pool, ownerID, name, namespace, nodes)
}

func insertClient(ctx context.Context, q querier, ownerID, name, namespace string, nodes int) (Client, error) {
	c, err := scanClient(q.QueryRow(ctx, `INSERT INTO clients (owner_id, name, namespace, nodes_count)
		VALUES ($1, $2, $3, $4) RETURNING `+clientColumns, ownerID, name, namespace, nodes))
	if err != nil {
		return Client{}, fmt.Errorf("create client: %w", mapError(err))
	}
	return c, nil
}

// ClientByID returns one client.
func (s *Store) ClientByID(ctx context.Context, id string) (Client, error) {
	if !IsUUID(id) {
		return Client{}, notFound("client %q not found", id)
	}
	c, err := scanClient(s.Pool.QueryRow(ctx, `SELECT `+clientColumns+` FROM clients WHERE id = $1`, id))
	if err != nil {
		return Client{}, rowError(err, "client", id)
	}
	return c, nil
}

// ListClients returns clients, newest first; ownerID "" = everyone's.
func (s *Store) ListClients(ctx context.Context, ownerID string) ([]Client, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+clientColumns+` FROM clients
		WHERE ($1::uuid IS NULL OR owner_id = $1) ORDER BY created_at DESC LIMIT 1000`, nullUUID(ownerID))
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", mapError(err))
	}
	defer rows.Close()
	out := []Client{}
	for rows.Next() {
		c, err := scanClient(rows)
		if err != nil {
			return nil, fmt.Errorf("list clients: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// SetClientStatus changes a client's status (and counts as a heartbeat).
func (s *Store) SetClientStatus(ctx context.Context, id, status string) (Client, error) {
	c, err := scanClient(s.Pool.QueryRow(ctx, `UPDATE clients SET status = $2, updated_at = now(), last_heartbeat_at = now()
		WHERE id = $1 RETURNING `+clientColumns, id, status))
	if err != nil {
		return Client{}, rowError(err, "client", id)
	}
	return c, nil
}

// HeartbeatClient records a heartbeat on the client and counts it as
// activity on its live servers.
func (s *Store) HeartbeatClient(ctx context.Context, id string) (Client, error) {
	c, err := scanClient(s.Pool.QueryRow(ctx, `UPDATE clients SET last_heartbeat_at = now()
		WHERE id = $1 RETURNING `+clientColumns, id))
	if err != nil {
		return Client{}, rowError(err, "client", id)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE servers SET last_activity_at = now()
		WHERE client_id = $1 AND status IN ('RUNNING', 'STARTING')`, id); err != nil {
		return Client{}, fmt.Errorf("client %s: %w", id, mapError(err))
	}
	return c, nil
}
