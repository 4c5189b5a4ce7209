package orchestrator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// TestInlineRunRenewsNoLease: a command run inline (run_bash_command with
// wait_seconds) announces its own IN_PROGRESS when it is inserted, and its
// lease holder must not take that for someone else's change: renewing on
// it cost every command a durable UPDATE, and one still in flight when
// the command ended was cancelled, which closes a pooled connection (a new
// PostgreSQL backend every few dozen commands). The operation lease is
// far longer than the test, so no renewal is due.
func TestInlineRunRenewsNoLease(t *testing.T) {
	r := newRunning(t, orchestrator.Config{})
	r.runBash(t, orchestrator.RunBashRequest{}) // warm: the share, the principal
	newConns := r.e.Store.Pool.Stat().NewConnsCount()
	r.e.Queries.Take()
	const commands = 40
	for range commands {
		if op := r.runBash(t, orchestrator.RunBashRequest{}); op.Status != orchestrator.OpSucceeded {
			t.Fatalf("run_bash_command true: %s (%s)", op.Status, op.Error)
		}
	}
	renewals := 0
	for _, q := range r.e.Queries.Take() {
		if strings.Contains(q, "SET lease_expires_at = now() +") {
			renewals++
		}
	}
	if renewals > 0 {
		t.Errorf("%d lease renewals in %d inline commands, want none", renewals, commands)
	}
	if n := r.e.Store.Pool.Stat().NewConnsCount() - newConns; n > 0 {
		t.Errorf("%d new database connections during %d inline commands, want none", n, commands)
	}
}

// TestCallerGoneMidInsertStillRunsItsCommand: a caller that goes away
// while its command is being recorded must not leave an operation that
// is recorded, claimed by this replica and run by nobody (it used to be
// failed a lease later as if the replica had died). The command is
// recorded and runs, as any whose caller leaves does.
func TestCallerGoneMidInsertStillRunsItsCommand(t *testing.T) {
	r := newRunning(t, orchestrator.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.e.Queries.Before(func(sql string) {
		if strings.Contains(sql, "INSERT INTO operations") {
			cancel()
		}
	})
	op, err := r.e.Svc.RunBashCommand(ctx, r.alice, orchestrator.RunBashRequest{
		ServerID: r.server, Command: "echo recorded", WaitSeconds: deadline.Seconds(),
	})
	r.e.Queries.Before(nil)
	if err != nil {
		t.Fatalf("a caller gone during the insert got %v; its command is lost or left to a lease", err)
	}
	done, err := r.e.Svc.GetOperation(context.Background(), r.alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != orchestrator.OpSucceeded || !strings.Contains(string(done.Result), "recorded") {
		t.Fatalf("the command whose caller left: %s %s %s", done.Status, done.Error, done.Result)
	}
}
