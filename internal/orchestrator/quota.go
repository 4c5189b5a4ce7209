package orchestrator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/store"
)

// execQuota bounds each user's concurrent commands (MaxExecsPerUser)
// across every replica without a database write per command. Each
// replica leases a share of a user's slots from PostgreSQL
// (store.GrowExecShare) and hands them out in memory: a command served
// from the share costs no round trip, and its end gives the slot back to
// the share, not to the database. A share grows when a command finds it
// full (one round trip, taken by one caller for everyone then waiting)
// and shrinks to what is in use on each sync, every lease/3, which also
// renews the lease. A replica that dies stops renewing: its shares count
// for nothing once their lease ends. See docs/design.md, "The exec quota".
type execQuota struct {
	store   *store.Store
	replica string
	max     int
	lease   time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	shares map[string]*share // by user id; guarded by mu
}

// share is one user's share on this replica. Its counts are guarded by
// execQuota.mu; write serializes this replica's writes of the share's
// row, so that the row, written whole each time, always holds at least
// granted.
type share struct {
	write sync.Mutex

	granted  int       // slots the row holds for this replica
	inflight int       // commands running on them (may exceed granted after a lapse)
	waiting  int       // callers waiting to grow the share
	refs     int       // callers holding this share: in flight or trying
	valid    time.Time // the lease as this replica counts it
	idle     time.Time // when a sync first found it unused, or zero
}

// forgetAfter is how long, in leases, an unused share's row is kept: it
// is updated in place when the user comes back, where deleting it and
// inserting it again would leave dead rows and grow the table (only
// vacuum lets an insert reuse the room a delete left).
const forgetAfter = 20

func newExecQuota(st *store.Store, replica string, max int, lease time.Duration, log *slog.Logger) *execQuota {
	return &execQuota{store: st, replica: replica, max: max, lease: lease, log: log, shares: map[string]*share{}}
}

// usable says whether a command can start on the share now. The caller
// holds q.mu.
func (sh *share) usable(now time.Time) bool {
	return now.Before(sh.valid) && sh.inflight < sh.granted
}

// acquire takes one of the user's slots. It returns false when the
// user's quota is in use, on this replica or others.
func (q *execQuota) acquire(ctx context.Context, userID string) (release func(), ok bool, err error) {
	q.mu.Lock()
	sh := q.shares[userID]
	if sh == nil {
		sh = &share{}
		q.shares[userID] = sh
	}
	sh.refs++
	sh.idle = time.Time{}
	if sh.usable(time.Now()) {
		sh.inflight++
		q.mu.Unlock()
		return q.releaser(sh), true, nil
	}
	sh.waiting++
	q.mu.Unlock()

	ok, err = q.grow(ctx, userID, sh)
	if !ok || err != nil {
		q.mu.Lock()
		sh.refs--
		q.mu.Unlock()
		return nil, false, err
	}
	return q.releaser(sh), true, nil
}

func (q *execQuota) releaser(sh *share) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			sh.inflight--
			sh.refs--
			q.mu.Unlock()
		})
	}
}

// grow asks for slots for this caller and every caller waiting behind
// it, and takes one when there is one. The caller counted itself in
// sh.waiting.
func (q *execQuota) grow(ctx context.Context, userID string, sh *share) (bool, error) {
	sh.write.Lock()
	defer sh.write.Unlock()
	q.mu.Lock()
	sh.waiting--
	now := time.Now()
	if sh.usable(now) {
		// The grow this caller waited for made room for it.
		sh.inflight++
		q.mu.Unlock()
		return true, nil
	}
	if !now.Before(sh.valid) {
		// The lease lapsed: the row counts for nothing, so the share
		// starts again from nothing, and the commands still running
		// are counted again in what it asks for.
		sh.granted = 0
	}
	have := sh.granted
	want := sh.inflight + sh.waiting + 1 - have
	q.mu.Unlock()

	// The write is not cancelled midway: whether a cancelled one took
	// slots would be unknown until the next sync.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), quotaWriteTimeout)
	defer cancel()
	sent := time.Now()
	added, err := q.store.GrowExecShare(wctx, userID, q.replica, have, want, q.max, q.lease)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		return false, err
	}
	if added > 0 {
		sh.granted = have + added
		sh.valid = q.validUntil(sent)
	}
	if !sh.usable(time.Now()) {
		return false, nil
	}
	sh.inflight++
	return true, nil
}

// quotaWriteTimeout bounds one write of the exec quota.
const quotaWriteTimeout = 10 * time.Second

// validUntil is when a lease granted by a write sent at sent ends as this
// replica counts it: PostgreSQL counts from a later now(), and the
// margin covers clocks that run at slightly different rates.
func (q *execQuota) validUntil(sent time.Time) time.Time {
	return sent.Add(q.lease - q.lease/10)
}

// run syncs the shares every lease/3 until ctx ends, then gives back
// every slot not in use.
func (q *execQuota) run(ctx context.Context) {
	t := time.NewTicker(q.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), quotaWriteTimeout)
			defer cancel()
			if err := q.sync(sctx); err != nil {
				q.log.Warn("give back exec quota at shutdown", "err", err)
			}
			return
		case <-t.C:
			if err := q.sync(ctx); err != nil && ctx.Err() == nil {
				q.log.Warn("sync exec quota", "err", err)
			}
		}
	}
}

// sync shrinks every share to the slots in use, forgets (and deletes the
// rows of) shares that held nothing and nobody used for forgetAfter
// leases, and renews the lease
// of the rest: one round trip. A share being grown keeps its size (its
// grower writes it).
func (q *execQuota) sync(ctx context.Context) error {
	var sizes []store.ShareSize
	var keep, drop []string
	var locked []*share
	defer func() {
		for _, sh := range locked {
			sh.write.Unlock()
		}
	}()
	q.mu.Lock()
	now := time.Now()
	for user, sh := range q.shares {
		if !sh.write.TryLock() {
			// Being grown: its grower renews it, and so may this sync.
			keep = append(keep, user)
			continue
		}
		if !now.Before(sh.valid) {
			sh.granted = 0
		}
		if sh.refs != 0 || sh.granted != 0 {
			sh.idle = time.Time{}
		} else if sh.idle.IsZero() {
			sh.idle = now
		}
		if !sh.idle.IsZero() && now.Sub(sh.idle) >= forgetAfter*q.lease {
			// Nobody can reach a share once it leaves the map (acquire
			// takes it under mu), so its row may go.
			delete(q.shares, user)
			drop = append(drop, user)
			sh.write.Unlock()
			continue
		}
		keep = append(keep, user)
		locked = append(locked, sh)
		// Shrinking before the write is safe: the row then holds more
		// than the replica uses until the write lands.
		sh.granted = min(sh.granted, sh.inflight)
		sizes = append(sizes, store.ShareSize{UserID: user, Slots: sh.granted})
	}
	q.mu.Unlock()

	sent := time.Now()
	renewed, err := q.store.SyncExecShares(ctx, q.replica, q.lease, keep, sizes, drop)
	if err != nil {
		return err
	}
	valid := q.validUntil(sent)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, user := range renewed {
		if sh := q.shares[user]; sh != nil && valid.After(sh.valid) {
			sh.valid = valid
		}
	}
	return nil
}
