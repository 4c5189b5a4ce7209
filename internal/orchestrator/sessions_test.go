package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// sessionBash runs command in the caller's session and fails the test on
// an error or a non-zero exit.
func sessionBash(t testing.TB, svc *orchestrator.Service, p rbac.Principal, session, command string) orchestrator.SessionBashResult {
	t.Helper()
	res, err := svc.SessionBash(context.Background(), p, orchestrator.SessionBashRequest{Session: session,
		SessionExecRequest: wire.SessionExecRequest{Command: command}})
	if err != nil {
		t.Fatalf("session %s: %q: %v", session, command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("session %s: %q exited %d: %s", session, command, res.ExitCode, res.Stderr)
	}
	return res
}

// liveServers counts the user's servers that hold a sandbox or are
// getting one.
func liveServers(t testing.TB, st *store.Store, userID string) int {
	t.Helper()
	var n int
	if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM servers WHERE owner_id = $1
		AND status IN ('STARTING', 'RUNNING', 'FINISHED')`, userID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// countClients counts the user's clients.
func countClients(t testing.TB, st *store.Store, userID string) int {
	t.Helper()
	var n int
	if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM clients WHERE owner_id = $1`, userID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSessionBash: the first call of a session starts a sandbox, later
// ones run in the same shell (cwd, variables and files persist), and
// another user's session of the same name is another sandbox.
func TestSessionBash(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	bob := principal(t, h.Svc, "bob")

	first := sessionBash(t, h.Svc, alice, "work-1", "mkdir -p sub && cd sub && export GREETING=hello && echo kept > file && pwd")
	if !first.Started || first.ServerID == "" || first.ClientID == "" || first.Stdout != "/workspace/sub\n" {
		t.Fatalf("first call: %+v, want a started sandbox with the shell in /workspace/sub", first)
	}
	again := sessionBash(t, h.Svc, alice, "work-1", `pwd; echo "$GREETING"; cat file`)
	if again.Started || again.ServerID != first.ServerID || again.ClientID != first.ClientID {
		t.Fatalf("second call: %+v, want the first call's sandbox %s", again, first.ServerID)
	}
	if again.Stdout != "/workspace/sub\nhello\nkept\n" {
		t.Fatalf("second call saw %q: cwd, variables or files did not persist", again.Stdout)
	}

	// The sandbox is an ordinary server of alice's, in a client berth
	// registered for the session in her default namespace.
	srv, err := h.Svc.GetServer(ctx, alice, first.ServerID)
	if err != nil || srv.Status != orchestrator.ServerRunning || srv.ImageTag != "base" || srv.ClientID != first.ClientID {
		t.Fatalf("session server: %+v %v", srv, err)
	}
	c, err := h.Svc.GetClient(ctx, alice, first.ClientID)
	if err != nil || c.Namespace != "default" || c.Name != "session work-1" {
		t.Fatalf("session client: %+v %v", c, err)
	}

	other := sessionBash(t, h.Svc, bob, "work-1", `echo "[$GREETING]"; ls /workspace`)
	if !other.Started || other.ServerID == first.ServerID || other.Stdout != "[]\n" {
		t.Fatalf("bob's session of the same name: %+v, want a sandbox of his own", other)
	}
	// Bob's session is not a way into alice's server either.
	if _, err := h.Svc.SessionExec(ctx, bob, first.ServerID, "work-1", wireExec("true")); wire.DetailOf(err).Code != wire.CodeNotFound {
		t.Fatalf("bob on alice's session server: %v, want not_found", err)
	}
	// A second session of alice's is a second sandbox.
	if second := sessionBash(t, h.Svc, alice, "work-2", "true"); !second.Started || second.ServerID == first.ServerID {
		t.Fatalf("alice's second session: %+v", second)
	}
	if n := liveServers(t, h.Store, alice.UserID); n != 2 {
		t.Fatalf("alice has %d live servers, want 2", n)
	}
}

// TestSessionBashRefusesBadInput: session keys that are not RFC 1123
// labels and commands the agent would refuse are refused at the call,
// naming what was wrong, before any sandbox starts.
func TestSessionBashRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	for _, key := range []string{"", "Work", "a_b", "-a", "a-", "a.b", "../x", "a b", strings.Repeat("a", 64), "é"} {
		_, err := h.Svc.SessionBash(ctx, alice, orchestrator.SessionBashRequest{Session: key, SessionExecRequest: wireExec("true")})
		wantCode(t, err, wire.CodeBadRequest, "session", "RFC 1123")
		_, err = h.Svc.EndSession(ctx, alice, key)
		wantCode(t, err, wire.CodeBadRequest, "session", "RFC 1123")
	}
	for _, req := range []wire.SessionExecRequest{{Command: " "}, {Command: "true", Timeout: -1}, {Command: "a\x00b"}} {
		_, err := h.Svc.SessionBash(ctx, alice, orchestrator.SessionBashRequest{Session: "ok", SessionExecRequest: req})
		wantCode(t, err, wire.CodeBadRequest)
	}
	// A token that may run commands but not create sandboxes cannot
	// start one, and is told which scope it lacks.
	execOnly := principal(t, h.Svc, "carol", string(rbac.ScopeExec))
	_, err := h.Svc.SessionBash(ctx, execOnly, orchestrator.SessionBashRequest{Session: "ok", SessionExecRequest: wireExec("true")})
	wantCode(t, err, wire.CodeForbidden, string(rbac.ScopeWrite))
	for _, p := range []rbac.Principal{alice, execOnly} {
		if n := liveServers(t, h.Store, p.UserID); n != 0 {
			t.Fatalf("refused calls of %s left %d servers", p.Username, n)
		}
	}
}

// TestSessionBashRace: first calls for one session at the same time, on
// two replicas of one database, end with one sandbox, and every call
// runs in it.
func TestSessionBashRace(t *testing.T) {
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	a, st := replica(t, url, "replica-a", orchtest.NewRuntime(t, agentBin, dir, nil))
	b, _ := replica(t, url, "replica-b", orchtest.NewRuntime(t, agentBin, dir, nil))
	orchtest.Run(t, a)
	orchtest.Run(t, b)
	alice := principal(t, a, "alice")

	const calls = 4
	results := make([]orchestrator.SessionBashResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		svc := a
		if i%2 == 1 {
			svc = b
		}
		wg.Go(func() {
			results[i], errs[i] = svc.SessionBash(context.Background(), alice, orchestrator.SessionBashRequest{Session: "race",
				SessionExecRequest: wireExec("echo call >> calls")})
		})
	}
	wg.Wait()
	started := 0
	for i := range calls {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if results[i].ServerID != results[0].ServerID {
			t.Fatalf("calls ran in servers %s and %s, want one", results[0].ServerID, results[i].ServerID)
		}
		if results[i].Started {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("%d calls say they started the sandbox, want 1", started)
	}
	if n := liveServers(t, st, alice.UserID); n != 1 {
		t.Fatalf("alice has %d live servers after the race, want 1", n)
	}
	if clients := countClients(t, st, alice.UserID); clients != 1 {
		t.Fatalf("the race registered %d clients, want 1", clients)
	}
	if got := sessionBash(t, b, alice, "race", "wc -l < calls"); strings.TrimSpace(got.Stdout) != "4" {
		t.Fatalf("the sandbox saw %q calls, want 4", got.Stdout)
	}
}

// TestSessionBashFailedStart: a sandbox that cannot be created fails the
// call with the reason, and the next call starts a new one.
func TestSessionBashFailedStart(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{SessionImage: "broken"})
	alice := principal(t, h.Svc, "alice")
	// A template with a FIFO is one the local runtime refuses to copy.
	tmpl := filepath.Join(h.DataDir, "images", "broken")
	if err := os.MkdirAll(tmpl, 0o755); err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(tmpl, "pipe")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.Svc.SessionBash(ctx, alice, orchestrator.SessionBashRequest{Session: "s", SessionExecRequest: wireExec("true")})
	if err == nil {
		t.Fatal("a session whose sandbox cannot be created ran its command")
	}
	d := wire.DetailOf(err)
	for _, w := range []string{"session s", "did not start", "pipe", "the next call starts a new one"} {
		if !strings.Contains(d.Message, w) {
			t.Fatalf("failed start reported as %s %q, which does not say %q", d.Code, d.Message, w)
		}
	}
	if n := liveServers(t, h.Store, alice.UserID); n != 0 {
		t.Fatalf("a failed start left %d live servers", n)
	}

	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	res := sessionBash(t, h.Svc, alice, "s", "echo up")
	if !res.Started || res.Stdout != "up\n" {
		t.Fatalf("the call after a failed start: %+v", res)
	}
	if clients := countClients(t, h.Store, alice.UserID); clients != 1 {
		t.Fatalf("%d clients after a failed start and a retry, want the session's one", clients)
	}
}

// TestSessionBashTakesWarm: a session's first call takes a ready server
// of the session image from the warm pool.
func TestSessionBashTakesWarm(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{WarmPool: map[string]int{"base": 1}})
	alice := principal(t, h.Svc, "alice")
	waitWarm(t, h, "base")
	var warmID string
	if err := h.Store.Pool.QueryRow(ctx, `SELECT id::text FROM servers WHERE warm AND status = 'RUNNING'`).Scan(&warmID); err != nil {
		t.Fatal(err)
	}
	res := sessionBash(t, h.Svc, alice, "quick", "echo warm")
	if !res.Started || res.ServerID != warmID || res.Stdout != "warm\n" {
		t.Fatalf("first call with a ready pool: %+v, want warm server %s", res, warmID)
	}
}

// TestEndSession: ending a session stops its sandbox and client and
// forgets it; a later call with the same key starts afresh.
func TestEndSession(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	bob := principal(t, h.Svc, "bob")
	first := sessionBash(t, h.Svc, alice, "done", "echo old > file")

	// Session keys are the caller's own: bob has no session "done".
	_, err := h.Svc.EndSession(ctx, bob, "done")
	wantCode(t, err, wire.CodeNotFound, "done")

	ended, err := h.Svc.EndSession(ctx, alice, "done")
	if err != nil || ended.ServerID != first.ServerID || ended.ClientID != first.ClientID || ended.Session != "done" {
		t.Fatalf("end session: %+v %v", ended, err)
	}
	srv, err := h.Svc.GetServer(ctx, alice, first.ServerID)
	if err != nil || srv.Status != orchestrator.ServerStopped {
		t.Fatalf("server of an ended session: %+v %v, want STOPPED", srv, err)
	}
	if gone, err := sandboxGone(ctx, h.Runtime, first.ServerID); err != nil || !gone {
		t.Fatalf("an ended session's sandbox is still there (%v)", err)
	}
	if c, err := h.Svc.GetClient(ctx, alice, first.ClientID); err != nil || c.Status != orchestrator.ClientStopped {
		t.Fatalf("client of an ended session: %+v %v, want STOPPED", c, err)
	}
	_, err = h.Svc.EndSession(ctx, alice, "done")
	wantCode(t, err, wire.CodeNotFound, "done")

	again := sessionBash(t, h.Svc, alice, "done", "cat file 2>/dev/null || echo fresh")
	if !again.Started || again.ServerID == first.ServerID || again.ClientID == first.ClientID || again.Stdout != "fresh\n" {
		t.Fatalf("call after the end: %+v, want a fresh sandbox", again)
	}
}

// TestSessionReaped: an idle session's sandbox is reaped like any idle
// server, its session and client go with it, and the next call starts a
// new sandbox.
func TestSessionReaped(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{IdleTimeout: 5 * time.Second})
	alice := principal(t, h.Svc, "alice")
	first := sessionBash(t, h.Svc, alice, "idle", "echo old > file")

	waitFor(t, "the idle session to be reaped and forgotten", func() (bool, error) {
		h.Svc.WatchOnce(ctx)
		_, err := h.Store.ShellSession(ctx, alice.UserID, "idle")
		if !errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		srv, err := h.Svc.GetServer(ctx, alice, first.ServerID)
		return srv.Status == orchestrator.ServerStopped, err
	})
	if gone, err := sandboxGone(ctx, h.Runtime, first.ServerID); err != nil || !gone {
		t.Fatalf("a reaped session's sandbox is still there (%v)", err)
	}
	if c, err := h.Svc.GetClient(ctx, alice, first.ClientID); err != nil || c.Status != orchestrator.ClientStopped {
		t.Fatalf("client of a reaped session: %+v %v, want STOPPED", c, err)
	}
	again := sessionBash(t, h.Svc, alice, "idle", "cat file 2>/dev/null || echo fresh")
	if !again.Started || again.ServerID == first.ServerID || again.Stdout != "fresh\n" {
		t.Fatalf("call after the reap: %+v, want a fresh sandbox", again)
	}
}

// TestSessionHostileSandbox: code in a session's sandbox that kills its
// own agent breaks only that sandbox: the session's next call starts a
// new one in the same client, and the quota bounds how many a user's
// sessions hold.
func TestSessionHostileSandbox(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{MaxServersPerUser: 1})
	alice := principal(t, h.Svc, "alice")
	first := sessionBash(t, h.Svc, alice, "evil", "echo planted > file")

	// The shell's parent is the agent; the call may or may not get an
	// answer before it dies.
	h.Svc.SessionBash(ctx, alice, orchestrator.SessionBashRequest{Session: "evil", SessionExecRequest: wireExec("kill -9 $PPID")})
	waitFor(t, "the server of the killed agent to fail", func() (bool, error) {
		srv, err := h.Svc.GetServer(ctx, alice, first.ServerID)
		return srv.Status == orchestrator.ServerFailed, err
	})
	again := sessionBash(t, h.Svc, alice, "evil", "cat file 2>/dev/null || echo fresh")
	if !again.Started || again.ServerID == first.ServerID || again.ClientID != first.ClientID || again.Stdout != "fresh\n" {
		t.Fatalf("call after the agent died: %+v, want a new sandbox in the session's client", again)
	}

	// One live server is alice's quota: a second session is refused,
	// saying so, and leaves nothing behind.
	_, err := h.Svc.SessionBash(ctx, alice, orchestrator.SessionBashRequest{Session: "more", SessionExecRequest: wireExec("true")})
	wantCode(t, err, wire.CodeTooManyRequests, "session more", "quota")
	if _, err := h.Store.ShellSession(ctx, alice.UserID, "more"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused session was recorded: %v", err)
	}
	if clients := countClients(t, h.Store, alice.UserID); clients != 1 {
		t.Fatalf("%d clients after a refused session, want the first session's one", clients)
	}
}

// TestSessionFinishedServerRunsAgain: a session whose server was
// finished (finish_server, finish_client) takes it back with its files,
// instead of starting another one.
func TestSessionFinishedServerRunsAgain(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	first := sessionBash(t, h.Svc, alice, "later", "echo kept > file")
	if _, err := h.Svc.FinishClient(ctx, alice, first.ClientID); err != nil {
		t.Fatal(err)
	}
	again := sessionBash(t, h.Svc, alice, "later", "cat file")
	if again.Started || again.ServerID != first.ServerID || again.Stdout != "kept\n" {
		t.Fatalf("call after finishing: %+v, want the session's server %s again", again, first.ServerID)
	}
	if srv, err := h.Svc.GetServer(ctx, alice, first.ServerID); err != nil || srv.Status != orchestrator.ServerRunning {
		t.Fatalf("session server after its next call: %+v %v, want RUNNING", srv, err)
	}
	if c, err := h.Svc.GetClient(ctx, alice, first.ClientID); err != nil || c.Status != orchestrator.ClientAlive {
		t.Fatalf("session client after its next call: %+v %v, want ALIVE", c, err)
	}
}
