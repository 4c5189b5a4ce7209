package orchestrator_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// runningWarm counts the warm servers of image ready to be handed out.
func runningWarm(ctx context.Context, st *store.Store, image string) (int, error) {
	var n int
	err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM servers WHERE warm AND status = 'RUNNING' AND image_tag = $1`, image).Scan(&n)
	return n, err
}

// waitWarm runs watcher rounds until the pool of image holds a running
// server.
func waitWarm(t testing.TB, h *orchtest.Env, image string) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "a warm "+image+" server", func() (bool, error) {
		h.Svc.WatchOnce(ctx)
		n, err := runningWarm(ctx, h.Store, image)
		return n > 0, err
	})
}

// TestWarmPool: the watcher keeps a ready server per configured image; a
// plain start takes it, a start with env cannot, and the pool refills
// without growing past its size.
func TestWarmPool(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{WarmPool: map[string]int{"img": 1}})
	admin := principal(t, h.Svc, "root")
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "warm")

	waitWarm(t, h, "img")
	// A warm server is nobody's: members do not see it or its operation.
	if list, err := h.Svc.ListServers(ctx, alice, ""); err != nil || len(list) != 0 {
		t.Fatalf("warm server listed: %+v %v", list, err)
	}
	var warmOp, warmID string
	if err := h.Store.Pool.QueryRow(ctx, `SELECT id::text, server_id::text FROM operations WHERE type = 'warm_server' LIMIT 1`).Scan(&warmOp, &warmID); err != nil {
		t.Fatal(err)
	}
	_, err := h.Svc.GetOperation(ctx, alice, warmOp, 0)
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetServer(ctx, alice, warmID)
	wantCode(t, err, wire.CodeNotFound)
	if _, err := h.Svc.GetOperation(ctx, admin, warmOp, 0); err != nil {
		t.Fatalf("admin reads the warm pool's operation: %v", err)
	}
	res := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "w"})
	if !res.Warm {
		t.Fatalf("start with a ready pool: %+v, want warm", res)
	}
	if res.Server.OwnerID != alice.UserID || res.Server.ClientID != c.ID || res.Server.ServerName != "w" || res.Server.Warm {
		t.Fatalf("warm server handed over as %+v", res.Server)
	}
	if got := bash(t, h.Svc, alice, res.ServerID, "echo warm", nil); got.Stdout != "warm\n" {
		t.Fatalf("bash on a warm server: %q", got.Stdout)
	}
	// Other images and starts with env do not come from the pool.
	if other := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "base"}); other.Warm {
		t.Fatal("an image without a pool got a warm server")
	}
	waitWarm(t, h, "img")
	withEnv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", Env: map[string]string{"A": "b"}})
	if withEnv.Warm {
		t.Fatal("a start with env took a warm server started without it")
	}
	// Watcher rounds, also concurrent ones, refill the pool to its size
	// and no further.
	if again := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "w2"}); !again.Warm {
		t.Fatal("second plain start got no warm server")
	}
	done := make(chan struct{})
	for range 3 {
		go func() { h.Svc.WatchOnce(ctx); done <- struct{}{} }()
	}
	for range 3 {
		<-done
	}
	var warm int
	if err := h.Store.Pool.QueryRow(ctx, `SELECT count(*) FROM servers WHERE warm AND status IN ('STARTING', 'RUNNING')`).Scan(&warm); err != nil || warm != 1 {
		t.Fatalf("%d warm servers (%v), want the pool size 1", warm, err)
	}

	// A start with a reuse strategy that finds nothing to reuse takes a
	// warm server through a worker, which checks it is up.
	waitWarm(t, h, "img")
	viaWorker := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "new", ReuseStrategy: "RESET"})
	if !viaWorker.Warm || viaWorker.Reused != "" {
		t.Fatalf("RESET with nothing to reuse: %+v, want a warm server", viaWorker)
	}
	if got := sessionExec(t, h.Svc, alice, viaWorker.ServerID, "", "echo ok"); got.Stdout != "ok\n" {
		t.Fatalf("exec: %q", got.Stdout)
	}

	// A warm server whose agent died is not handed out: it is marked
	// failed (and replaced) and the start gets a new server.
	waitWarm(t, h, "img")
	var deadID string
	if err := h.Store.Pool.QueryRow(ctx, `SELECT id::text FROM servers WHERE warm AND status = 'RUNNING'`).Scan(&deadID); err != nil {
		t.Fatal(err)
	}
	pid, ok := h.Runtime.Pid(deadID)
	if !ok {
		t.Fatalf("warm server %s has no running sandbox", deadID)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warm agent to die", func() (bool, error) {
		st, err := h.Runtime.Status(ctx, deadID)
		return st.State == runtime.StateFailed, err
	})
	cold := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "after-death"})
	if cold.Warm || cold.ServerID == deadID {
		t.Fatalf("start took the dead warm server: %+v", cold)
	}
	var status string
	if err := h.Store.Pool.QueryRow(ctx, `SELECT status FROM servers WHERE id = $1`, deadID).Scan(&status); err != nil || status != orchestrator.ServerFailed {
		t.Fatalf("dead warm server is %s (%v), want FAILED", status, err)
	}
	waitWarm(t, h, "img")
}

// TestIdleReaping: a running server nobody uses is stopped once the idle
// timeout passed, and a finished one once its time to live passed.
func TestIdleReaping(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		cfg    orchestrator.Config
		finish bool
	}{
		{"idle", orchestrator.Config{IdleTimeout: time.Second}, false},
		// With the default idle timeout, so that the server cannot be
		// reaped as idle before the test finishes it.
		{"finished", orchestrator.Config{FinishedTTL: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newService(t, tc.cfg)
			alice := principal(t, h.Svc, "alice")
			c := registerClient(t, h.Svc, alice, "reap")
			srv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
			if tc.finish {
				if _, err := h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "server reaped", func() (bool, error) {
				h.Svc.WatchOnce(ctx)
				got, err := h.Svc.GetServer(ctx, alice, srv.ServerID)
				return got.Status == orchestrator.ServerStopped, err
			})
			if gone, err := sandboxGone(ctx, h.Runtime, srv.ServerID); err != nil || !gone {
				t.Fatalf("reaped server still has its sandbox (%v)", err)
			}
		})
	}
}

// TestReconcile: a sandbox nobody wants is deleted, and a server whose
// sandbox vanished is marked failed (and can be restarted).
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "reconcile")
	srv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})

	const orphan = "0a1b2c3d-0000-4000-8000-000000000001"
	if err := h.Runtime.Create(ctx, runtime.Spec{ServerID: orphan, AgentToken: "orphan-token-orphan-token-orphan"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Delete(ctx, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watcher to reconcile", func() (bool, error) {
		h.Svc.WatchOnce(ctx)
		got, err := h.Svc.GetServer(ctx, alice, srv.ServerID)
		if err != nil {
			return false, err
		}
		gone, err := sandboxGone(ctx, h.Runtime, orphan)
		return got.Status == orchestrator.ServerFailed && gone, err
	})
	got, _ := h.Svc.GetServer(ctx, alice, srv.ServerID)
	if !strings.Contains(got.Error, "vanished") {
		t.Fatalf("failed server's error %q does not say why", got.Error)
	}
	op, err := h.Svc.RestartServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	startResult(t, op)
	if got := sessionExec(t, h.Svc, alice, srv.ServerID, "", "echo back"); got.Stdout != "back\n" {
		t.Fatalf("after restart: %q", got.Stdout)
	}
}
