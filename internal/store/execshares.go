package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Exec shares: a replica's part of one user's concurrent exec quota
// (table exec_shares, see migrations/00010). The orchestrator hands the
// slots of a share out in memory; these calls run only when a share must
// grow, and on the replica's periodic sync, never once per command.

// GrowExecShare grows replica's share of the user's quota of max slots
// from have (what the replica holds now, by its own count; 0 when its
// lease lapsed) by up to want, taking only what the live shares of the
// other replicas leave. It returns how many slots it added (0 when none
// were free, and then it writes nothing); the share then holds have+added
// slots, leased for lease.
//
// It is one round trip, a pipelined transaction. The user's advisory lock
// makes the growers of one user, on every replica, take turns, so two
// cannot both take the last slot; it is taken only here, when a share
// grows, so commands served from a share never wait for it. Shares of
// replicas that stopped renewing them are deleted on the way: they count
// for nothing, and a dead replica's id never comes back.
func (s *Store) GrowExecShare(ctx context.Context, userID, replica string, have, want, max int, lease time.Duration) (int, error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 7))`, userID)
	b.Queue(`DELETE FROM exec_shares WHERE user_id = $1 AND replica <> $2 AND expires_at <= now()`, userID, replica)
	// The share is written whole (have+n, not slots+n): the replica's own
	// count is the truth, which also corrects a row left larger by a grow
	// whose answer was lost.
	b.Queue(`INSERT INTO exec_shares AS s (user_id, replica, slots, expires_at)
		SELECT $1, $2, $3::int + g.n, now() + $6 * interval '1 millisecond'
		FROM (SELECT least($4::int, $5::int - $3::int - coalesce(sum(slots), 0)::int) AS n
			FROM exec_shares WHERE user_id = $1 AND replica <> $2) g
		WHERE g.n > 0
		ON CONFLICT (user_id, replica) DO UPDATE SET slots = excluded.slots, expires_at = excluded.expires_at
		RETURNING slots - $3::int`, userID, replica, have, want, max, lease.Milliseconds())
	b.Queue(`COMMIT`)
	br := s.Pool.SendBatch(ctx, b)
	defer br.Close()
	for range 3 {
		if _, err := br.Exec(); err != nil {
			return 0, fmt.Errorf("grow exec share of user %s: %w", userID, mapError(err))
		}
	}
	var added int
	if err := br.QueryRow().Scan(&added); err != nil && err != pgx.ErrNoRows {
		return 0, fmt.Errorf("grow exec share of user %s: %w", userID, mapError(err))
	}
	if _, err := br.Exec(); err != nil {
		return 0, fmt.Errorf("grow exec share of user %s: %w", userID, mapError(err))
	}
	return added, nil
}

// ShareSize sets one user's share of a replica to Slots.
type ShareSize struct {
	UserID string
	Slots  int
}

// SyncExecShares is a replica's periodic sync, one round trip: it renews
// the lease of the shares of replica for the users in keep that have not
// expired, sets the shares in sizes (users also in keep) to their sizes
// (a replica only ever shrinks a share here, so this needs no lock), and
// deletes the shares of drop that hold no slot or expired. It returns the
// users whose shares it renewed; a share not among them expired and
// counts for nothing. A share of a user in neither list is left to
// expire.
func (s *Store) SyncExecShares(ctx context.Context, replica string, lease time.Duration, keep []string, sizes []ShareSize, drop []string) ([]string, error) {
	users := make([]string, len(sizes))
	slots := make([]int32, len(sizes))
	for i, z := range sizes {
		users[i], slots[i] = z.UserID, int32(z.Slots)
	}
	if drop == nil {
		drop = []string{}
	}
	if keep == nil {
		keep = []string{}
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	// A dropped share holding a slot was grown again since the replica
	// decided to drop it (a new command came): it stays.
	b.Queue(`DELETE FROM exec_shares WHERE replica = $1 AND user_id = ANY($2::uuid[]) AND (slots = 0 OR expires_at <= now())`,
		replica, drop)
	b.Queue(`UPDATE exec_shares s SET expires_at = now() + $2 * interval '1 millisecond',
			slots = coalesce((SELECT t.n FROM unnest($3::uuid[], $4::int[]) AS t(u, n) WHERE t.u = s.user_id), s.slots)
		WHERE replica = $1 AND user_id = ANY($5::uuid[]) AND expires_at > now()
		RETURNING user_id::text`, replica, lease.Milliseconds(), users, slots, keep)
	b.Queue(`COMMIT`)
	br := s.Pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("sync exec shares of replica %s: %w", replica, mapError(err))
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("sync exec shares of replica %s: %w", replica, mapError(err))
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sync exec shares of replica %s: %w", replica, mapError(err))
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("sync exec shares of replica %s: %w", replica, mapError(err))
	}
	return renewed, nil
}
