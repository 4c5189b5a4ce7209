package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/store"
)

// Counter records the round trips a store makes: one per query (a
// transaction's begin and commit are queries too) and one per batch,
// which pgx sends as one pipeline. Tests pin how many round trips a call
// costs with it, so that a change adding one fails a test. It sees every
// connection of its store, background work included: callers measure a
// call several times and keep the smallest count (MinRoundTrips).
type Counter struct {
	mu   sync.Mutex
	sent []string
	// before, when set, is called with each round trip's SQL before it
	// is sent, so a test can act at an exact point of a call.
	before func(sql string)
}

// Before makes fn run before each round trip, with its SQL (nil: stop).
func (c *Counter) Before(fn func(sql string)) {
	c.mu.Lock()
	c.before = fn
	c.mu.Unlock()
}

// NewCounted is New with a Counter on the store.
func NewCounted(t testing.TB) (*store.Store, *Counter) {
	t.Helper()
	return OpenCounted(t, URL(t))
}

// OpenCounted is Open with a Counter on the store.
func OpenCounted(t testing.TB, url string) (*store.Store, *Counter) {
	t.Helper()
	c := &Counter{}
	s, err := store.OpenTraced(t.Context(), url, c)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s, c
}

// Take returns what was sent since the last Take, one entry per round
// trip (a query's SQL, or "batch: " and its queries' SQL), and forgets it.
func (c *Counter) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.sent
	c.sent = nil
	return out
}

func (c *Counter) add(what string) {
	c.mu.Lock()
	c.sent = append(c.sent, what)
	before := c.before
	c.mu.Unlock()
	if before != nil {
		before(what)
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.add(oneLine(data.SQL))
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	var sqls []string
	if data.Batch != nil {
		for _, q := range data.Batch.QueuedQueries {
			sqls = append(sqls, oneLine(q.SQL))
		}
	}
	c.add("batch: " + strings.Join(sqls, "; "))
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// MinRoundTrips runs call n times and returns the round trips of the run
// that made the fewest: background work of the replica (lease renewals,
// the watcher) lands in some runs, never in all of them, and first runs
// pay for caches (the token's principal, prepared statements) that the
// later ones find warm.
func (c *Counter) MinRoundTrips(t testing.TB, n int, call func()) []string {
	t.Helper()
	var best []string
	for i := range n {
		c.Take()
		call()
		got := c.Take()
		if i == 0 || len(got) < len(best) {
			best = got
		}
	}
	return best
}

// Describe lists round trips one a line, for a failure message.
func Describe(sent []string) string {
	var b strings.Builder
	for i, s := range sent {
		fmt.Fprintf(&b, "\n  %d. %.300s", i+1, s)
	}
	return b.String()
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }
