package orchestrator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestWaitOperation: a waiting GetOperation returns once the operation is
// done, woken by the database's notification; an operation that cannot
// finish in time comes back unfinished when the wait ends.
func TestWaitOperation(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "wait")

	op, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != orchestrator.OpScheduled || op.Result != nil {
		t.Fatalf("without wait_seconds: %+v, want SCHEDULED", op)
	}
	done, err := h.Svc.GetOperation(ctx, alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	srv := startResult(t, done)

	// The command waits for a file, so it cannot finish before the test
	// creates it.
	op, err = h.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{
		ServerID: srv.ServerID, Command: "while [ ! -f go ]; do sleep 0.05; done; echo went",
	})
	if err != nil {
		t.Fatal(err)
	}
	waited, err := h.Svc.GetOperation(ctx, alice, op.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if waited.Status != orchestrator.OpScheduled && waited.Status != orchestrator.OpInProgress {
		t.Fatalf("after a 1s wait the blocked command is %s, want it unfinished", waited.Status)
	}
	sessionExec(t, h.Svc, alice, srv.ServerID, "default", "touch go")
	done, err = h.Svc.GetOperation(ctx, alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != orchestrator.OpSucceeded || done.Result == nil {
		t.Fatalf("command operation %+v, want SUCCEEDED", done)
	}

	// A finished operation answers at once, whatever the wait.
	again, err := h.Svc.GetOperation(ctx, alice, op.ID, deadline.Seconds())
	if err != nil || again.Status != orchestrator.OpSucceeded {
		t.Fatalf("finished operation: %+v %v", again, err)
	}
	// Bad waits and unknown ids are the caller's error.
	_, err = h.Svc.GetOperation(ctx, alice, op.ID, 301)
	wantCode(t, err, wire.CodeBadRequest, "wait_seconds")
	_, err = h.Svc.GetOperation(ctx, alice, "not-an-id", 0)
	wantCode(t, err, wire.CodeNotFound)
}

// gatedRuntime is the real runtime with a gate in front of the first
// WaitReady: it announces the server on entered and holds the replica
// inside the operation (the sandbox created, its readiness not yet seen)
// until release is closed, then waits for real; with no release it holds
// until the replica shuts down. Tests use it to act at a known point of a
// start.
type gatedRuntime struct {
	runtime.Runtime
	once    sync.Once
	entered chan string
	release chan struct{}
}

func (g *gatedRuntime) WaitReady(ctx context.Context, id string) (runtime.Endpoint, error) {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.Runtime.WaitReady(ctx, id)
	}
	g.entered <- id
	select {
	case <-g.release:
		return g.Runtime.WaitReady(ctx, id)
	case <-ctx.Done():
		return runtime.Endpoint{}, ctx.Err()
	}
}

// TestTwoReplicas runs two orchestrators on one database and one runtime
// data dir: either serves reads, either's workers run what the other
// scheduled, and an operation whose replica dies mid-way is taken over
// once its lease expires.
func TestTwoReplicas(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	gate := &gatedRuntime{Runtime: orchtest.NewRuntime(t, agentBin, dir, nil), entered: make(chan string, 1)}
	a, st := replica(t, url, "replica-a", gate)
	rtB := orchtest.NewRuntime(t, agentBin, dir, nil)
	b, _ := replica(t, url, "replica-b", rtB)

	alice := principal(t, a, "alice")
	stopB := orchtest.Run(t, b)

	// A's Run is not running: only B's workers can run what A schedules.
	c := registerClient(t, a, alice, "two")
	op, err := a.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "one"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := b.GetOperation(ctx, alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	res := startResult(t, done)
	for name, svc := range map[string]*orchestrator.Service{"a": a, "b": b} {
		if got, err := svc.GetClient(ctx, alice, c.ID); err != nil || got.ID != c.ID {
			t.Fatalf("replica %s GetClient: %+v %v", name, got, err)
		}
		if got, err := svc.GetServer(ctx, alice, res.ServerID); err != nil || got.Status != orchestrator.ServerRunning {
			t.Fatalf("replica %s GetServer: %+v %v", name, got, err)
		}
		if got, err := svc.GetOperation(ctx, alice, op.ID, 0); err != nil || got.Status != orchestrator.OpSucceeded {
			t.Fatalf("replica %s GetOperation: %+v %v", name, got, err)
		}
	}
	// Both reach the sandbox B started.
	if got := sessionExec(t, a, alice, res.ServerID, "s", "echo via-a"); got.Stdout != "via-a\n" {
		t.Fatalf("exec through A: %q", got.Stdout)
	}
	// A replica that does not listen for notifications still bounds a
	// wait by wait_seconds.
	waitA, err := a.GetOperation(ctx, alice, op.ID, 1)
	if err != nil || waitA.Status != orchestrator.OpSucceeded {
		t.Fatalf("wait on A: %+v %v", waitA, err)
	}
	stopB()
	op2, err := a.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "nobody", WaitSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if op2.Status != orchestrator.OpScheduled {
		t.Fatalf("with no replica running, the start is %s, want SCHEDULED", op2.Status)
	}

	// The crash: A claims the start (and the one scheduled above), stops
	// while it waits for the sandbox, and B takes over after the lease.
	stopA := orchtest.Run(t, a)
	var crashed string
	select {
	case crashed = <-gate.entered:
	case <-time.After(deadline):
		t.Fatal("replica A never ran the start")
	}
	stopA()
	inFlight, err := st.OperationByID(ctx, op2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if crashed != op2.ServerID || inFlight.Status != orchestrator.OpInProgress || inFlight.Attempts != 1 {
		t.Fatalf("after A stopped: operation %+v (A was starting %s), want it IN_PROGRESS after one attempt", inFlight, crashed)
	}
	var owner string
	if err := st.Pool.QueryRow(ctx, `SELECT lease_owner FROM operations WHERE id = $1`, op2.ID).Scan(&owner); err != nil || owner != "replica-a/1" {
		t.Fatalf("lease owner %q (%v), want replica-a/1", owner, err)
	}

	orchtest.Run(t, b)
	done, err = b.GetOperation(ctx, alice, op2.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	res2 := startResult(t, done)
	if res2.ServerID != op2.ServerID {
		t.Fatalf("takeover started server %s, want %s", res2.ServerID, op2.ServerID)
	}
	final, err := st.OperationByID(ctx, op2.ID)
	if err != nil || final.Attempts != 2 {
		t.Fatalf("after takeover: %+v %v, want 2 attempts", final, err)
	}
	if got := sessionExec(t, b, alice, res2.ServerID, "s", "echo taken-over"); got.Stdout != "taken-over\n" {
		t.Fatalf("exec on the taken-over server: %q", got.Stdout)
	}
	// A's shutdown must not have marked anything failed.
	srv, err := b.GetServer(ctx, alice, res2.ServerID)
	if err != nil || srv.Status != orchestrator.ServerRunning || srv.Error != "" {
		t.Fatalf("taken-over server %+v %v", srv, err)
	}
	if st, err := rtB.Status(ctx, res2.ServerID); err != nil || st.State != runtime.StateReady {
		t.Fatalf("sandbox %+v %v", st, err)
	}
}

// TestStopWhileStarting: a server stopped while its start is under way
// stays stopped, and the start leaves no sandbox behind.
func TestStopWhileStarting(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	rt := orchtest.NewRuntime(t, agentBin, orchtest.DataDir(t), nil)
	gate := &gatedRuntime{Runtime: rt, entered: make(chan string, 1), release: make(chan struct{})}
	svc, err := orchestrator.New(st, gate, testConfig(t, orchestrator.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	orchtest.Run(t, svc)
	alice := principal(t, svc, "alice")
	c := registerClient(t, svc, alice, "stop-early")
	op, err := svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.entered:
	case <-time.After(deadline):
		t.Fatal("the start never reached WaitReady")
	}
	stopped, err := svc.StopServer(ctx, alice, orchestrator.ServerRef{ServerID: op.ServerID})
	if err != nil || stopped.Status != orchestrator.ServerStopped {
		t.Fatalf("stop while starting: %+v %v", stopped, err)
	}
	close(gate.release)
	done, err := svc.GetOperation(ctx, alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != orchestrator.OpFailed {
		t.Fatalf("start of a stopped server: %+v, want FAILED", done)
	}
	srv, err := svc.GetServer(ctx, alice, op.ServerID)
	if err != nil || srv.Status != orchestrator.ServerStopped {
		t.Fatalf("server after its start failed: %+v %v, want it still STOPPED", srv, err)
	}
	if gone, err := sandboxGone(ctx, rt, op.ServerID); err != nil || !gone {
		t.Fatalf("a sandbox outlived its stopped server (%v)", err)
	}
}

// TestStartFailure: a sandbox that does not become ready in time fails
// its start: the server is FAILED (so it no longer counts in the quota)
// and its sandbox is deleted.
func TestStartFailure(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{ReadyTimeout: time.Nanosecond, MaxServersPerUser: 1})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "fail")
	for range 2 { // the second start proves the first freed its quota place
		op, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", WaitSeconds: deadline.Seconds()})
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != orchestrator.OpFailed || !strings.Contains(op.Error, "not ready") {
			t.Fatalf("start with no time to get ready: %+v, want FAILED saying why", op)
		}
		srv, err := h.Svc.GetServer(ctx, alice, op.ServerID)
		if err != nil || srv.Status != orchestrator.ServerFailed || srv.Error == "" {
			t.Fatalf("server of a failed start: %+v %v", srv, err)
		}
		if gone, err := sandboxGone(ctx, h.Runtime, op.ServerID); err != nil || !gone {
			t.Fatalf("failed start left its sandbox (%v)", err)
		}
	}
}
