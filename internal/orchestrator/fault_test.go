package orchestrator_test

import (
	"context"
	"strings"
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

// TestWaitingCallerGoingAwayKeepsTheOperation: a caller that waits for a
// command (and so has it run on its own replica) and then disconnects
// does not cancel it; the operation finishes and its result is kept.
func TestWaitingCallerGoingAwayKeepsTheOperation(t *testing.T) {
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "leaver")
	res := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", WaitSeconds: deadline.Seconds()})

	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		op  orchestrator.Operation
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		op, err := h.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{
			ServerID: res.ServerID, Command: "touch started; while [ ! -e go-on ]; do sleep 0.05; done; echo finished", WaitSeconds: deadline.Seconds(),
		})
		answered <- answer{op, err}
	}()
	// Leave once the command is running.
	waitFor(t, "the command to start", func() (bool, error) {
		out := sessionExec(t, h.Svc, alice, res.ServerID, "probe", "test -e started && echo yes; true")
		return out.Stdout == "yes\n", nil
	})
	cancel()
	var a answer
	select {
	case a = <-answered:
	case <-time.After(deadline):
		t.Fatal("the call did not return after its caller left")
	}
	if a.err != nil || a.op.ID == "" {
		t.Fatalf("the leaving call answered %+v %v", a.op, a.err)
	}
	sessionExec(t, h.Svc, alice, res.ServerID, "probe", "touch go-on")
	done, err := h.Svc.GetOperation(context.Background(), alice, a.op.ID, deadline.Seconds())
	if err != nil || done.Status != orchestrator.OpSucceeded || done.Result == nil || !strings.Contains(string(done.Result), `finished`) {
		t.Fatalf("operation after its caller left: %+v %v", done, err)
	}
}
