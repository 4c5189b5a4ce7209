package forward

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/berth-mcp/berth/internal/wire"
)

// Budget bounds the memory that the answers berth reads whole hold at
// once, across all of them: bounding each answer alone leaves the sum to
// how many a sandbox (or several) can have in flight.
//
// An answer's first freeBytes are free, and most answers end there. One
// that goes on reserves, at once, what it may still need (the rest of its
// announced length, else of its limit), all or nothing, so answers never
// hold part of the budget while waiting for more, and none waits on
// another for ever. It waits up to Wait for that, then fails as
// unavailable; once it holds a reservation it must end within Hold, so a
// sandbox trickling bytes cannot keep the budget from everyone else.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
	// Wait bounds the wait for a reservation, Hold how long an answer may
	// keep one.
	Wait, Hold time.Duration
}

// freeBytes of an answer are read without a reservation.
const freeBytes = 64 << 10

// NewBudget returns a budget of size bytes that waits up to 30 s for a
// reservation and lets an answer hold one for a minute: a sandbox's agent
// sends its largest legitimate answer in well under a second.
func NewBudget(size int64) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size, Wait: 30 * time.Second, Hold: time.Minute}
}

// reserve takes n bytes (at most the whole budget) for serverID's answer
// and returns how much it took.
func (b *Budget) reserve(ctx context.Context, n int64, serverID string) (int64, error) {
	n = min(n, b.size)
	if b.sem.TryAcquire(n) {
		return n, nil
	}
	wctx, cancel := context.WithTimeout(ctx, b.Wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, wire.Errorf(wire.CodeUnavailable, "berth holds as much of sandbox answers in memory as it may (%d bytes) and the answer of server %s needs %d more; retry in a moment", b.size, serverID, n)
	}
	return n, nil
}

func (b *Budget) release(n int64) {
	if n > 0 {
		b.sem.Release(n)
	}
}

// releaseIfSet is release on a budget that may be nil.
func (b *Budget) releaseIfSet(n int64) {
	if b != nil {
		b.release(n)
	}
}
