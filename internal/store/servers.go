package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/egress"
)

// Resources are a server's requested compute resources.
type Resources struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// Server is a row of servers. Its JSON form is the API's; the sealed env
// and the reuse key stay inside.
type Server struct {
	ID               string     `json:"id"`
	ClientID         string     `json:"client_id"`
	OwnerID          string     `json:"owner_id"`
	Namespace        string     `json:"namespace"`
	ServerName       string     `json:"server_name"`
	ImageTag         string     `json:"image_tag"`
	RuntimeClassName string     `json:"runtime_class_name"`
	Resources        Resources  `json:"resources"`
	EnvKeys          []string   `json:"env_keys"`
	Status           string     `json:"status"`
	Warm             bool       `json:"warm,omitempty"`
	Error            string     `json:"error,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	LastActivityAt   time.Time  `json:"last_activity_at"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
	RestartPolicy    string     `json:"restart_policy"`
	Restarts         int        `json:"restarts"`
	// UpstreamNames are the MCP upstreams declared at start; their
	// declarations are sealed in UpstreamsSealed.
	UpstreamNames []string `json:"mcp_upstreams"`
	// UnhealthySince is when the health checks of its agent began to
	// fail (nil while they pass), HealthError what the last one said.
	UnhealthySince *time.Time `json:"unhealthy_since,omitempty"`
	HealthError    string     `json:"health_error,omitempty"`
	// Network is its sandbox's egress policy.
	Network egress.Policy `json:"network"`

	ReuseKey        string    `json:"-"`
	EnvSealed       []byte    `json:"-"`
	UpstreamsSealed []byte    `json:"-"`
	Endpoint        *Endpoint `json:"-"`
	// RuntimeOwner names the owner of the server's sandbox (a runtime's
	// Owner ID); "" for a server not placed yet, or recorded before
	// owners were (any replica may act on those).
	RuntimeOwner string `json:"-"`
}

// Endpoint is where a running server's agent listens.
type Endpoint struct {
	Network string `json:"network"`
	Address string `json:"address"`
}

const serverColumns = `id::text, coalesce(client_id::text, ''), coalesce(owner_id::text, ''), namespace, server_name, image_tag,
	runtime_class_name, resources, env_keys, status, warm, error, created_at, updated_at, last_activity_at, finished_at,
	restart_policy, restarts, reuse_key, env_sealed, endpoint, upstream_names, upstreams_sealed, runtime_owner,
	unhealthy_since, health_error, network`

func scanServer(row interface{ Scan(...any) error }) (Server, error) {
	var s Server
	var res, ep, network []byte
	err := row.Scan(&s.ID, &s.ClientID, &s.OwnerID, &s.Namespace, &s.ServerName, &s.ImageTag, &s.RuntimeClassName,
		&res, &s.EnvKeys, &s.Status, &s.Warm, &s.Error, &s.CreatedAt, &s.UpdatedAt, &s.LastActivityAt, &s.FinishedAt,
		&s.RestartPolicy, &s.Restarts, &s.ReuseKey, &s.EnvSealed, &ep, &s.UpstreamNames, &s.UpstreamsSealed, &s.RuntimeOwner,
		&s.UnhealthySince, &s.HealthError, &network)
	if err != nil {
		return s, err
	}
	if len(res) > 0 {
		if err := json.Unmarshal(res, &s.Resources); err != nil {
			return s, fmt.Errorf("server %s resources: %w", s.ID, err)
		}
	}
	if len(ep) > 0 {
		s.Endpoint = &Endpoint{}
		if err := json.Unmarshal(ep, s.Endpoint); err != nil {
			return s, fmt.Errorf("server %s endpoint: %w", s.ID, err)
		}
	}
	if len(network) > 0 {
		if err := json.Unmarshal(network, &s.Network); err != nil {
			return s, fmt.Errorf("server %s network: %w", s.ID, err)
		}
	}
	if s.EnvKeys == nil {
		s.EnvKeys = []string{}
	}
	if s.UpstreamNames == nil {
		s.UpstreamNames = []string{}
	}
	return s, nil
}

func collectServers(rows pgx.Rows) ([]Server, error) {
	defer rows.Close()
	out := []Server{}
	for rows.Next() {
		s, err := scanServer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// NewServer is a server row to insert.
type NewServer struct {
	ClientID, OwnerID, Namespace, ServerName, ImageTag, RuntimeClassName, ReuseKey string
	Resources                                                                      Resources
	EnvKeys                                                                        []string
	EnvSealed                                                                      []byte
	UpstreamNames                                                                  []string
	UpstreamsSealed                                                                []byte
	Status                                                                         string
	Warm                                                                           bool
	// RuntimeOwner places the server on a runtime's owner at once (the
	// replica that inserts it runs its start); "" leaves it to whichever
	// replica runs the start.
	RuntimeOwner string
	// DiskBytes is the disk its sandbox takes (what the disk quota
	// counts); 0 for none.
	DiskBytes int64
	// Network is its sandbox's egress policy (zero: the runtime enforces
	// none).
	Network egress.Policy
}

// InsertServer inserts a server inside tx.
func InsertServer(ctx context.Context, tx pgx.Tx, n NewServer) (Server, error) {
	res, _ := json.Marshal(n.Resources)
	network, _ := json.Marshal(n.Network)
	srv, err := scanServer(tx.QueryRow(ctx, `INSERT INTO servers
		(client_id, owner_id, namespace, server_name, image_tag, runtime_class_name, resources, env_keys, env_sealed, reuse_key, status, warm,
		 upstream_names, upstreams_sealed, runtime_owner, disk_bytes, network)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) RETURNING `+serverColumns,
		nullUUID(n.ClientID), nullUUID(n.OwnerID), n.Namespace, n.ServerName, n.ImageTag, n.RuntimeClassName, res,
		nonNil(n.EnvKeys), n.EnvSealed, n.ReuseKey, n.Status, n.Warm, nonNil(n.UpstreamNames), n.UpstreamsSealed, n.RuntimeOwner, n.DiskBytes, network))
	if err != nil {
		return Server{}, fmt.Errorf("insert server: %w", mapError(err))
	}
	return srv, nil
}

// Started is what a sandbox is started with besides its image: the env
// and the MCP upstream declarations, names in clear and values sealed.
type Started struct {
	EnvKeys         []string
	EnvSealed       []byte
	UpstreamNames   []string
	UpstreamsSealed []byte
}

// ClaimReusable locks and hands over the oldest FINISHED server of the
// owner with the reuse key, skipping rows other transactions hold, so two
// concurrent starts never get the same server; one whose sandbox
// runtimeOwner can act on (ActsOn) comes first. With replace the server
// takes with's env and upstreams (its sandbox is about to be created
// again); without, it keeps those its sandbox runs with.
func ClaimReusable(ctx context.Context, tx pgx.Tx, ownerID, reuseKey, clientID string, replace bool, with Started, runtimeOwner string) (Server, bool, error) {
	// Skipping locked rows keeps concurrent starts off each other's
	// servers; but a row is also locked for a moment by writers that are
	// not claims (a health check marking it, say), and a RESET must not
	// start a new server because of one. So when every candidate was
	// skipped, the claim waits for the oldest: a claim that took it in the
	// meantime leaves it no longer FINISHED, and this one gets none.
	for _, lock := range []string{"FOR UPDATE SKIP LOCKED", "FOR UPDATE"} {
		srv, err := scanServer(tx.QueryRow(ctx, `UPDATE servers SET status = 'STARTING', client_id = $3,
			env_keys = CASE WHEN $6 THEN $4 ELSE env_keys END, env_sealed = CASE WHEN $6 THEN $5 ELSE env_sealed END,
			upstream_names = CASE WHEN $6 THEN $7 ELSE upstream_names END,
			upstreams_sealed = CASE WHEN $6 THEN $8 ELSE upstreams_sealed END,
			finished_at = NULL, error = '', updated_at = now(), last_activity_at = now()
		WHERE id = (SELECT id FROM servers WHERE owner_id = $1 AND reuse_key = $2 AND status = 'FINISHED'
			ORDER BY `+actsOn("$9")+` DESC, finished_at LIMIT 1 `+lock+`)
		RETURNING `+serverColumns, ownerID, reuseKey, clientID, nonNil(with.EnvKeys), with.EnvSealed, replace,
			nonNil(with.UpstreamNames), with.UpstreamsSealed, runtimeOwner))
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			return Server{}, false, fmt.Errorf("claim reusable server: %w", mapError(err))
		}
		return srv, true, nil
	}
	return Server{}, false, nil
}

// ClaimWarm hands a ready warm-pool server of the image to the owner:
// preferID when it is still to be had (the caller checked its agent),
// else the oldest. A warm server only goes to a client of its own
// namespace: runtimes place sandboxes by namespace (a Kubernetes
// namespace), and a sandbox does not move. Only servers whose sandbox
// runtimeOwner can act on are handed out (ActsOn): a start takes the
// warm sandboxes of the replica it reached, which is the one its
// caller's next calls reach too.
func ClaimWarm(ctx context.Context, tx pgx.Tx, imageTag, ownerID, clientID, namespace, serverName, reuseKey, preferID, runtimeOwner string) (Server, bool, error) {
	srv, err := scanServer(tx.QueryRow(ctx, `UPDATE servers SET warm = false, owner_id = $2, client_id = $3, namespace = $4,
			server_name = $5, reuse_key = $6, updated_at = now(), last_activity_at = now()
		WHERE id = (SELECT id FROM servers WHERE warm AND status = 'RUNNING' AND image_tag = $1 AND namespace = $4
			AND `+actsOn("$8")+`
			ORDER BY id = $7 DESC, created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+serverColumns, imageTag, ownerID, clientID, namespace, serverName, reuseKey, nullUUID(preferID), runtimeOwner))
	if err == pgx.ErrNoRows {
		return Server{}, false, nil
	}
	if err != nil {
		return Server{}, false, fmt.Errorf("claim warm server: %w", mapError(err))
	}
	return srv, true, nil
}

// ReadyWarm returns up to limit warm servers of the image in the
// namespace that are running and whose sandbox runtimeOwner can act on,
// oldest first.
func (s *Store) ReadyWarm(ctx context.Context, imageTag, namespace string, limit int, runtimeOwner string) ([]Server, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+serverColumns+` FROM servers
		WHERE warm AND status = 'RUNNING' AND image_tag = $1 AND namespace = $3 AND `+actsOn("$4")+`
		ORDER BY created_at LIMIT $2`, imageTag, limit, namespace, runtimeOwner)
	if err != nil {
		return nil, fmt.Errorf("warm servers: %w", mapError(err))
	}
	out, err := collectServers(rows)
	if err != nil {
		return nil, fmt.Errorf("warm servers: %w", err)
	}
	return out, nil
}

// Usage is what an owner's live servers (starting, running, finished)
// hold: what the server and disk quotas count.
type Usage struct {
	Servers   int
	DiskBytes int64
}

// LiveUsage adds up the owner's servers that hold resources, inside tx;
// a server started before its disk was recorded counts as defaultDisk. It
// first takes a transaction lock on the owner's quota, so that starts
// racing each other count one another's new servers and cannot together
// pass a quota.
func LiveUsage(ctx context.Context, tx pgx.Tx, ownerID string, defaultDisk int64) (Usage, error) {
	// One round trip: the count is its own statement, so its snapshot is
	// taken after the lock is held.
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('berth server quota ' || $1::text, 0))`, ownerID)
	var u Usage
	b.Queue(`SELECT count(*), coalesce(sum(coalesce(disk_bytes, $2)), 0)::bigint FROM servers WHERE owner_id = $1
		AND status IN ('STARTING', 'RUNNING', 'FINISHED')`, ownerID, defaultDisk).QueryRow(func(row pgx.Row) error { return row.Scan(&u.Servers, &u.DiskBytes) })
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return Usage{}, fmt.Errorf("count live servers: %w", mapError(err))
	}
	return u, nil
}

// MarkRestarting moves a running, finished or failed server to STARTING
// inside tx, for a restart, whose fresh sandbox takes diskBytes. It
// reports ErrConflict naming the current status when the server is in
// another one.
func MarkRestarting(ctx context.Context, tx pgx.Tx, id string, diskBytes int64) error {
	var cur string
	err := tx.QueryRow(ctx, `UPDATE servers SET status = 'STARTING', error = '', disk_bytes = $2, updated_at = now()
		WHERE id = $1 AND status IN ('RUNNING', 'FINISHED', 'FAILED') RETURNING status`, id, diskBytes).Scan(&cur)
	if err == pgx.ErrNoRows {
		if err := tx.QueryRow(ctx, `SELECT status FROM servers WHERE id = $1`, id).Scan(&cur); err != nil {
			return rowError(err, "server", id)
		}
		return newError(ErrConflict, "server %s is %s; only running, finished or failed servers restart", id, cur)
	}
	if err != nil {
		return rowError(err, "server", id)
	}
	return nil
}

// MarkStopping moves a server to STOPPING inside tx, from any status but
// STOPPED, with note as its error (what a reader should know about the
// stop, or ""). It reports false when the server is stopped already.
func MarkStopping(ctx context.Context, tx pgx.Tx, id, note string) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE servers SET status = 'STOPPING', error = $2, warm = false, updated_at = now()
		WHERE id = $1 AND status <> 'STOPPED'`, id, note)
	if err != nil {
		return false, rowError(err, "server", id)
	}
	return tag.RowsAffected() == 1, nil
}

// SetRestartPolicy sets a server's restart policy and clears its count of
// restarts, as a start hands the server to its (new) owner.
func SetRestartPolicy(ctx context.Context, tx pgx.Tx, id, policy string) (Server, error) {
	srv, err := scanServer(tx.QueryRow(ctx, `UPDATE servers SET restart_policy = $2, restarts = 0
		WHERE id = $1 RETURNING `+serverColumns, id, policy))
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// MarkRecovering moves a server whose sandbox stopped on its own from
// RUNNING or FINISHED back to STARTING for an automatic restart, counting
// it; it is a conflict when the server is in another state by now or has
// used up maxRestarts.
func MarkRecovering(ctx context.Context, tx pgx.Tx, id, why string, maxRestarts int) (Server, error) {
	// A server that ran ten minutes since its last change of status
	// starts counting again: only a crash loop uses the restarts up.
	srv, err := scanServer(tx.QueryRow(ctx, `UPDATE servers SET status = 'STARTING', error = $2, updated_at = now(),
			restarts = CASE WHEN updated_at < now() - interval '10 minutes' THEN 1 ELSE restarts + 1 END
		WHERE id = $1 AND status IN ('RUNNING', 'FINISHED') AND restart_policy = 'on_failure'
			AND (restarts < $3 OR updated_at < now() - interval '10 minutes')
		RETURNING `+serverColumns, id, why, maxRestarts))
	if err == pgx.ErrNoRows {
		return Server{}, newError(ErrConflict, "server %s is not due for an automatic restart", id)
	}
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// ServerByID returns one server.
func (s *Store) ServerByID(ctx context.Context, id string) (Server, error) {
	if !IsUUID(id) {
		return Server{}, notFound("server %q not found", id)
	}
	srv, err := scanServer(s.Pool.QueryRow(ctx, `SELECT `+serverColumns+` FROM servers WHERE id = $1`, id))
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// ServerFilter selects servers to list.
type ServerFilter struct {
	OwnerID  string // "" = any owner
	ClientID string // "" = any client
	Statuses []string
}

// ListServers returns servers, newest first (warm-pool servers excluded).
func (s *Store) ListServers(ctx context.Context, f ServerFilter) ([]Server, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+serverColumns+` FROM servers
		WHERE NOT warm AND ($1::uuid IS NULL OR owner_id = $1) AND ($2::uuid IS NULL OR client_id = $2)
		AND (cardinality($3::text[]) = 0 OR status = ANY($3))
		ORDER BY created_at DESC LIMIT 1000`, nullUUID(f.OwnerID), nullUUID(f.ClientID), nonNil(f.Statuses))
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", mapError(err))
	}
	out, err := collectServers(rows)
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	return out, nil
}

// SetServerStatus moves a server to status, optionally only from one of
// the given statuses (none = from any). It reports ErrConflict naming the
// current status when the server is in another one.
func (s *Store) SetServerStatus(ctx context.Context, id, status, errMsg string, from ...string) (Server, error) {
	srv, err := scanServer(s.Pool.QueryRow(ctx, `UPDATE servers SET status = $2, error = $3, updated_at = now(),
			finished_at = CASE WHEN $2 = 'FINISHED' THEN now() ELSE finished_at END,
			stopped_at = CASE WHEN $2 IN ('STOPPED', 'FAILED') THEN now() ELSE stopped_at END,
			last_activity_at = CASE WHEN $2 = 'RUNNING' THEN now() ELSE last_activity_at END,
			warm = CASE WHEN $2 IN ('STOPPED', 'FAILED', 'STOPPING') THEN false ELSE warm END
		WHERE id = $1 AND (cardinality($4::text[]) = 0 OR status = ANY($4))
		RETURNING `+serverColumns, id, status, errMsg, nonNil(from)))
	if err == pgx.ErrNoRows {
		cur, getErr := s.ServerByID(ctx, id)
		if getErr != nil {
			return Server{}, getErr
		}
		return Server{}, newError(ErrConflict, "server %s is %s; cannot move it to %s", id, cur.Status, status)
	}
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// TouchServer records activity (an exec, a forward, a heartbeat) but
// writes at most once per minInterval, so busy servers do not turn every
// call into a write.
func (s *Store) TouchServer(ctx context.Context, id string, minInterval time.Duration) error {
	return s.execNoSync(ctx, `UPDATE servers SET last_activity_at = now()
		WHERE id = $1 AND last_activity_at < now() - $2::interval`, id, minInterval)
}

// ServersToReap returns servers the watcher should stop: running servers
// idle since before idleBefore (warm ones excluded) and finished ones
// finished before finishedBefore.
func (s *Store) ServersToReap(ctx context.Context, idleBefore, finishedBefore time.Time) ([]Server, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+serverColumns+` FROM servers
		WHERE (status = 'RUNNING' AND NOT warm AND last_activity_at < $1)
		   OR (status = 'FINISHED' AND finished_at < $2)
		ORDER BY updated_at LIMIT 100`, idleBefore, finishedBefore)
	if err != nil {
		return nil, fmt.Errorf("servers to reap: %w", mapError(err))
	}
	return collectServers(rows)
}

// CountWarm counts warm servers of an image that are running or starting,
// inside tx. It first takes a transaction lock on the image's pool, so
// that watcher rounds running at once (on several replicas, or an admin's
// WatchOnce) each see the others' new servers and never fill the pool
// past its size.
func CountWarm(ctx context.Context, tx pgx.Tx, imageTag string) (int, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('berth warm pool ' || $1::text, 0))`, imageTag); err != nil {
		return 0, fmt.Errorf("lock warm pool %s: %w", imageTag, mapError(err))
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM servers WHERE warm AND image_tag = $1
		AND status IN ('STARTING', 'RUNNING')`, imageTag).Scan(&n)
	return n, mapError(err)
}

// LiveServerIDs returns the ids of servers that should have a sandbox of
// runtimeOwner's (of any owner when it is "").
func (s *Store) LiveServerIDs(ctx context.Context, runtimeOwner string) (map[string]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT id::text, status FROM servers WHERE status IN ('STARTING', 'RUNNING', 'FINISHED', 'STOPPING')
		AND ($1 = '' OR runtime_owner = $1)`, runtimeOwner)
	if err != nil {
		return nil, mapError(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, rows.Err()
}

// SetServerRunning records that the server's agent answers at ep.
func (s *Store) SetServerRunning(ctx context.Context, id string, ep Endpoint) (Server, error) {
	b, _ := json.Marshal(ep)
	srv, err := scanServer(s.Pool.QueryRow(ctx, `UPDATE servers SET status = 'RUNNING', endpoint = $2, error = '',
			updated_at = now(), last_activity_at = now(), unhealthy_since = NULL, health_error = ''
		WHERE id = $1 AND status IN ('STARTING', 'RUNNING') RETURNING `+serverColumns, id, b))
	if err == pgx.ErrNoRows {
		cur, getErr := s.ServerByID(ctx, id)
		if getErr != nil {
			return Server{}, getErr
		}
		return Server{}, newError(ErrConflict, "server %s became %s while it was starting", id, cur.Status)
	}
	if err != nil {
		return Server{}, rowError(err, "server", id)
	}
	return srv, nil
}

// LiveServersByOwner counts every owner's servers that hold resources
// (what the server quota counts), for the admin's view of quotas.
func (s *Store) LiveServersByOwner(ctx context.Context) (map[string]int, error) {
	rows, err := s.Pool.Query(ctx, `SELECT owner_id::text, count(*) FROM servers
		WHERE owner_id IS NOT NULL AND status IN ('STARTING', 'RUNNING', 'FINISHED') GROUP BY owner_id`)
	if err != nil {
		return nil, fmt.Errorf("count live servers by owner: %w", mapError(err))
	}
	out := map[string]int{}
	var (
		owner string
		n     int
	)
	_, err = pgx.ForEachRow(rows, []any{&owner, &n}, func() error { out[owner] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("count live servers by owner: %w", mapError(err))
	}
	return out, nil
}
