package orchestrator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestServerQuota: past MaxServersPerUser a start answers 429 naming the
// limit; a stopped server frees its place.
func TestServerQuota(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{MaxServersPerUser: 1})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "quota")

	srv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	_, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "second"})
	wantCode(t, err, wire.CodeTooManyRequests, "1 of 1")
	// A finished server still holds its sandbox, so it still counts; the
	// way to use it is to reuse it.
	if _, err := h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "second"})
	wantCode(t, err, wire.CodeTooManyRequests, "1 of 1")
	reused := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ReuseStrategy: "reset"})
	if reused.ServerID != srv.ServerID {
		t.Fatalf("reuse within the quota gave %s, want %s", reused.ServerID, srv.ServerID)
	}
	if _, err := h.Svc.StopServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "second"})
	// The quota is per user.
	bob := principal(t, h.Svc, "bob")
	startServer(t, h.Svc, bob, orchestrator.StartServerRequest{ClientID: registerClient(t, h.Svc, bob, "b").ID, ImageTag: "img"})
}

// TestExecQuota: while a command holds the user's only exec slot, another
// exec answers 429; the slot is free again once the command ends.
func TestExecQuota(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{MaxExecsPerUser: 1})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "quota")
	srv := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})

	type result struct {
		res wire.BashResult
		err error
	}
	first := make(chan result, 1)
	go func() {
		res, err := h.Svc.SessionExec(ctx, alice, srv.ServerID, "long", wire.SessionExecRequest{
			Command: "while [ ! -f release ]; do sleep 0.05; done; echo released", Timeout: deadline.Seconds(),
		})
		first <- result{res, err}
	}()
	// The agent's session list shows the command running; asking goes
	// through the forwarding path, which takes no exec slot.
	waitFor(t, "the long command to run", func() (bool, error) {
		var list wire.SessionList
		agentGet(t, h.Svc, alice, srv.ServerID, "api/sessions", &list)
		for _, s := range list.Sessions {
			if s.ID == "long" && s.Busy {
				return true, nil
			}
		}
		select {
		case r := <-first:
			t.Fatalf("the long command ended early: %+v %v", r.res, r.err)
		default:
		}
		return false, nil
	})

	_, err := h.Svc.SessionExec(ctx, alice, srv.ServerID, "other", wireExec("true"))
	wantCode(t, err, wire.CodeTooManyRequests, "at most 1")
	// run_bash_command counts too: its operation fails with the quota.
	op, err := h.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{ServerID: srv.ServerID, Command: "true", WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != orchestrator.OpFailed || !strings.Contains(op.Error, "quota") {
		t.Fatalf("bash over the quota: %+v, want FAILED naming the quota", op)
	}

	// Release the command by writing the file through the agent's file
	// API (a forward, so no exec slot).
	target, err := h.Svc.ForwardTarget(ctx, alice, "", srv.ServerID, "api/fs/write")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Svc.Forwarder().Do(ctx, target, "POST", "api/fs/write", map[string][]string{"Content-Type": {"application/json"}},
		strings.NewReader(`{"path": "release", "content": ""}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("write release: %d", resp.StatusCode)
	}
	r := <-first
	if r.err != nil || r.res.Stdout != "released\n" {
		t.Fatalf("long command: %+v %v", r.res, r.err)
	}
	if got := sessionExec(t, h.Svc, alice, srv.ServerID, "other", "echo free"); got.Stdout != "free\n" {
		t.Fatalf("after release: %q", got.Stdout)
	}
}

// TestServerQuotaConcurrent: starts racing each other cannot together
// pass the quota.
func TestServerQuotaConcurrent(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{MaxServersPerUser: 1})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "race")
	const n = 6
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: fmt.Sprint("s", i)})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		wantCode(t, err, wire.CodeTooManyRequests, "quota")
	}
	if ok != 1 {
		t.Fatalf("%d of %d racing starts passed a quota of 1", ok, n)
	}
}

// TestDiskQuota: the disk a user's live servers take together is held to
// MaxDiskPerUser, counted at start from what the runtime says a sandbox
// takes (orchtest.SandboxDisk here): past it a start answers 429 naming
// the quota, the use and the size asked; a restart of a failed server
// counts like a new one; a server recorded before its disk was counts as
// one of today's.
func TestDiskQuota(t *testing.T) {
	ctx := context.Background()
	const quota = 640 << 20 // two and a half sandboxes
	h := newService(t, orchestrator.Config{MaxDiskPerUser: quota})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "disk")
	start := func(name string) (orchestrator.Operation, error) {
		return h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: name, WaitSeconds: deadline.Seconds()})
	}
	first := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "one"})
	startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "two"})
	_, err := start("three")
	wantCode(t, err, wire.CodeTooManyRequests, "disk quota", "512Mi of your 640Mi", "takes 256Mi")

	// Servers of before the disk was recorded count at today's size.
	if _, err := h.Store.Pool.Exec(ctx, `UPDATE servers SET disk_bytes = NULL WHERE id = $1`, first.ServerID); err != nil {
		t.Fatal(err)
	}
	_, err = start("three")
	wantCode(t, err, wire.CodeTooManyRequests, "512Mi of your 640Mi")

	// A failed server holds nothing; bringing it back takes its size again.
	if _, err := h.Store.SetServerStatus(ctx, first.ServerID, orchestrator.ServerFailed, "failed for the test"); err != nil {
		t.Fatal(err)
	}
	startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "three"})
	_, err = h.Svc.RestartServer(ctx, alice, orchestrator.ServerRef{ServerID: first.ServerID}, 0)
	wantCode(t, err, wire.CodeTooManyRequests, "disk quota", "512Mi of your 640Mi")

	// The quota is per user.
	bob := principal(t, h.Svc, "bob")
	startServer(t, h.Svc, bob, orchestrator.StartServerRequest{ClientID: registerClient(t, h.Svc, bob, "b").ID, ImageTag: "img"})

	// A quota no sandbox fits in is a configuration error.
	_, err = orchestrator.New(h.Store, h.Runtime, testConfig(t, orchestrator.Config{MaxDiskPerUser: 100 << 20}))
	if err == nil || !strings.Contains(err.Error(), "100Mi") || !strings.Contains(err.Error(), "256Mi") {
		t.Fatalf("a disk quota smaller than one sandbox: %v, want it refused naming both", err)
	}
}

// TestDiskQuotaConcurrent: starts racing each other cannot together pass
// the disk quota.
func TestDiskQuotaConcurrent(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{MaxDiskPerUser: orchtest.SandboxDisk})
	alice := principal(t, h.Svc, "alice")
	c := registerClient(t, h.Svc, alice, "race")
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: fmt.Sprint("s", i)})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		wantCode(t, err, wire.CodeTooManyRequests, "disk quota")
	}
	if ok != 1 {
		t.Fatalf("%d of %d racing starts passed a disk quota of one sandbox", ok, n)
	}
}
