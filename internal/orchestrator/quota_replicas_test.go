package orchestrator

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// quotaUser makes a user to charge commands to.
func quotaUser(t *testing.T, st *store.Store, name string) string {
	t.Helper()
	u, _, err := st.EnsureUser(context.Background(), store.NewUser{Username: name}, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// takeSlot acquires a slot and fails the test unless the answer is want.
func takeSlot(t *testing.T, q *execQuota, user string, want bool) func() {
	t.Helper()
	release, ok, err := q.acquire(context.Background(), user)
	if err != nil {
		t.Fatalf("replica %s: acquire: %v", q.replica, err)
	}
	if ok != want {
		t.Fatalf("replica %s: acquire gave %v, want %v", q.replica, ok, want)
	}
	return release
}

// waitSlot waits until the replica hands out a slot.
func waitSlot(t *testing.T, q *execQuota, user string, within time.Duration) (func(), time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		release, ok, err := q.acquire(context.Background(), user)
		if err != nil {
			t.Fatalf("replica %s: acquire: %v", q.replica, err)
		}
		if ok {
			return release, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("replica %s: no slot within %s", q.replica, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecQuotaReplicas: two replicas share one user's quota (what one
// uses the other cannot), a slot one gives back reaches the other with
// its next sync, and a replica killed while holding slots gives them
// back when its lease ends, not before.
func TestExecQuotaReplicas(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t)
	stA, stB := storetest.Open(t, url), storetest.Open(t, url)
	alice := quotaUser(t, stA, "alice")
	const lease = 2 * time.Second
	qa := newExecQuota(stA, "a", 4, lease, slog.New(slog.DiscardHandler))
	qb := newExecQuota(stB, "b", 4, lease, slog.New(slog.DiscardHandler))

	var held []func()
	for range 3 {
		held = append(held, takeSlot(t, qa, alice, true))
	}
	held = append(held, takeSlot(t, qb, alice, true))
	takeSlot(t, qb, alice, false)
	takeSlot(t, qa, alice, false)
	// Another user's quota is their own.
	bob := quotaUser(t, stA, "bob")
	takeSlot(t, qb, bob, true)()

	// A's freed slot stays in its share (and serves A at once) until A
	// syncs; then B can take it.
	held[0]()
	takeSlot(t, qb, alice, false)
	if err := qa.sync(ctx); err != nil {
		t.Fatal(err)
	}
	takeSlot(t, qb, alice, true)
	takeSlot(t, qa, alice, false)

	// B dies holding 2 slots: its connections are gone and nothing of it
	// syncs or releases again. A, running as a replica does, gets them
	// back within a lease (plus the sync that notices), and not while
	// B's lease holds.
	ctxA, stopA := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { qa.run(ctxA) })
	defer func() { stopA(); wg.Wait() }()
	stB.Close()
	killed := time.Now()
	takeSlot(t, qa, alice, false)
	release, took := waitSlot(t, qa, alice, deadlineQuota)
	if since := time.Since(killed); since < lease/2 {
		t.Fatalf("the dead replica's slots came back after %s, before its lease of %s could end", since, lease)
	}
	t.Logf("the dead replica's slots came back after %s (lease %s)", took, lease)
	held = append(held, release, takeSlot(t, qa, alice, true))
	takeSlot(t, qa, alice, false)
	for _, r := range held[1:] {
		r()
	}
}

// deadlineQuota bounds the waits of the quota tests: far above a lease,
// for a loaded machine.
const deadlineQuota = 60 * time.Second

// TestExecQuotaConcurrent: callers racing on two replicas, which sync
// (shrink, renew, forget) all the while, never hold more than the
// quota together, and each replica gets its turn; when all is released
// the shares give every slot back.
func TestExecQuotaConcurrent(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	url := storetest.URL(t)
	st := storetest.Open(t, url)
	alice := quotaUser(t, st, "alice")
	const max, lease = 5, 300 * time.Millisecond
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var qs []*execQuota
	for _, name := range []string{"a", "b"} {
		q := newExecQuota(storetest.Open(t, url), name, max, lease, slog.New(slog.DiscardHandler))
		wg.Go(func() { q.run(ctx) })
		qs = append(qs, q)
	}

	var held, peak atomic.Int64
	got := make([]atomic.Int64, len(qs))
	var callers sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		q := qs[i%2]
		callers.Go(func() {
			// Each caller runs until it has taken its slots, not for a
			// count of attempts: a replica whose share the other holds
			// gets room only at the other's next sync, which on a busy
			// machine can come after many refused attempts.
			end := time.Now().Add(deadlineQuota)
			for taken := 0; taken < 20 && time.Now().Before(end); {
				release, ok, err := q.acquire(ctx, alice)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					continue
				}
				taken++
				got[i%2].Add(1)
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				release()
			}
		})
	}
	callers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak.Load() > max {
		t.Fatalf("%d commands held slots at once, quota %d", peak.Load(), max)
	}
	for i := range got {
		if got[i].Load() == 0 {
			t.Fatalf("replica %s never got a slot", qs[i].replica)
		}
	}
	t.Logf("peak %d of %d; slots taken: a %d, b %d", peak.Load(), max, got[0].Load(), got[1].Load())
	start := time.Now()
	for {
		var n int
		if err := st.Pool.QueryRow(ctx, `SELECT coalesce(sum(slots), 0) FROM exec_shares`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Since(start) > deadlineQuota {
			t.Fatalf("shares still hold %d slots with nothing running", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
