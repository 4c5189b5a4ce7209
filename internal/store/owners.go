package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Every server's sandbox belongs to a runtime owner (servers.runtime_owner,
// a runtime.Owner ID), and only replicas of that owner act on it. The rule
// has one form everywhere, ActsOn in Go and actsOn in SQL: a replica of
// owner O may act on a server recorded with owner R when O is "" (its
// runtime names no owner: every replica reaches every sandbox), R is ""
// (not placed yet, or recorded before owners were), or R = O.

// ActsOn reports whether a replica whose runtime's owner is replicaOwner
// may act on a sandbox recorded with serverOwner.
func ActsOn(replicaOwner, serverOwner string) bool {
	return replicaOwner == "" || serverOwner == "" || serverOwner == replicaOwner
}

// actsOn is ActsOn as SQL over servers.runtime_owner, the replica's
// owner being the parameter param ("$3").
func actsOn(param string) string {
	return "(" + param + " = '' OR runtime_owner IN ('', " + param + "))"
}

// RuntimeOwner is a row of runtime_owners: the liveness record of one
// owner of sandboxes, written by its replicas.
type RuntimeOwner struct {
	ID string
	// Name says where, for operators (it may hold a host path).
	Name string
	// Host and URL say where for clients: the host and the public URL of
	// the replica that last wrote the row.
	Host, URL string
	Shared    bool
	SeenAt    time.Time
	// Silent is how long ago, by the database's clock, a replica of the
	// owner last wrote the row.
	Silent time.Duration
}

// SeeOwner records that a replica of the owner is alive now, as o says
// (ID, Name, Host, URL, Shared).
func (s *Store) SeeOwner(ctx context.Context, o RuntimeOwner) error {
	_, err := s.Pool.Exec(ctx, `INSERT INTO runtime_owners (id, name, host, url, shared, seen_at) VALUES ($1, $2, $3, $4, $5, now())
		ON CONFLICT (id) DO UPDATE SET name = $2, host = $3, url = $4, shared = $5, seen_at = now()`,
		o.ID, o.Name, o.Host, o.URL, o.Shared)
	if err != nil {
		return fmt.Errorf("record runtime owner %s alive: %w", o.ID, mapError(err))
	}
	return nil
}

// RuntimeOwnerByID returns an owner's liveness record; ErrNotFound when
// no replica of it ever wrote one.
func (s *Store) RuntimeOwnerByID(ctx context.Context, id string) (RuntimeOwner, error) {
	var o RuntimeOwner
	err := s.Pool.QueryRow(ctx, `SELECT id, name, host, url, shared, seen_at, now() - seen_at FROM runtime_owners WHERE id = $1`, id).
		Scan(&o.ID, &o.Name, &o.Host, &o.URL, &o.Shared, &o.SeenAt, &o.Silent)
	if errors.Is(err, pgx.ErrNoRows) {
		return RuntimeOwner{}, notFound("runtime owner %q not found", id)
	}
	if err != nil {
		return RuntimeOwner{}, fmt.Errorf("runtime owner %s: %w", id, mapError(err))
	}
	return o, nil
}

// PlaceServer records owner as the owner of the server's sandbox, before
// its sandbox is made. A server another owner holds already is a
// conflict naming that owner: only that owner may make its sandbox.
func (s *Store) PlaceServer(ctx context.Context, id, owner string) error {
	tag, err := s.Pool.Exec(ctx, `UPDATE servers SET runtime_owner = $2 WHERE id = $1 AND runtime_owner IN ('', $2)`, id, owner)
	if err != nil {
		return rowError(err, "server", id)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	srv, err := s.ServerByID(ctx, id)
	if err != nil {
		return err
	}
	return newError(ErrConflict, "server %s belongs to runtime owner %s, not %s", id, srv.RuntimeOwner, owner)
}

// ClaimUnplaced records owner as the owner of those of ids that have
// none: servers recorded before owners were, whose sandboxes the owner's
// runtime holds.
func (s *Store) ClaimUnplaced(ctx context.Context, owner string, ids []string) (int64, error) {
	var uuids []string
	for _, id := range ids {
		if IsUUID(id) {
			uuids = append(uuids, id)
		}
	}
	if len(uuids) == 0 {
		return 0, nil
	}
	tag, err := s.Pool.Exec(ctx, `UPDATE servers SET runtime_owner = $1 WHERE runtime_owner = '' AND id = ANY($2::uuid[])`, owner, uuids)
	if err != nil {
		return 0, fmt.Errorf("claim servers for runtime owner %s: %w", owner, mapError(err))
	}
	return tag.RowsAffected(), nil
}

// StoppingUnscheduled returns the STOPPING servers owner may act on that
// no operation of type stopType is scheduled or running for: stops whose
// work was lost (a replica of an earlier berth died in the middle of
// one, or the operation was failed as stuck).
func (s *Store) StoppingUnscheduled(ctx context.Context, owner, stopType string) ([]Server, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+serverColumns+` FROM servers WHERE status = 'STOPPING' AND `+actsOn("$1")+`
		AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.server_id = servers.id AND o.type = $2
			AND o.status IN ('SCHEDULED', 'IN_PROGRESS'))
		ORDER BY updated_at LIMIT 100`, owner, stopType)
	if err != nil {
		return nil, fmt.Errorf("stopping servers: %w", mapError(err))
	}
	return collectServers(rows)
}
