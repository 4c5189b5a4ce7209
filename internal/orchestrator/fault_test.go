package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// TestSurvivesDatabaseConnectionLoss kills every database connection the
// orchestrator holds (as a PostgreSQL restart or failover would), then
// starts a server and waits for it: the listener reconnects, workers claim
// again, and the waiting call is still woken when the start finishes.
func TestSurvivesDatabaseConnectionLoss(t *testing.T) {
	h := newService(t, orchestrator.Config{})
	ctx := context.Background()
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "faults")

	// Let the listener be up before cutting it off.
	first, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "before", WaitSeconds: deadline.Seconds()})
	if err != nil || first.Status != orchestrator.OpSucceeded {
		t.Fatalf("start before the cut: %+v %v", first, err)
	}

	var killed int
	err = h.Store.Pool.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()) t`).Scan(&killed)
	if err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no connection was cut")
	}

	// The pool replaces dead connections on use; the first calls after a
	// cut may still meet one, so retry the start for a short while.
	var op orchestrator.Operation
	until := time.Now().Add(deadline)
	for {
		op, err = h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "after", WaitSeconds: deadline.Seconds()})
		if err == nil || time.Now().After(until) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start after the cut: %v", err)
	}
	if op.Status != orchestrator.OpSucceeded {
		t.Fatalf("after the cut the start ended %s (%s); the waiter or the workers did not recover", op.Status, op.Error)
	}
	res := startResult(t, op)
	if got := sessionExec(t, h.Svc, alice, res.ServerID, "s", "echo alive"); got.Stdout != "alive\n" {
		t.Fatalf("exec after the cut: %q", got.Stdout)
	}
}
