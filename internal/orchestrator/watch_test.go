package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// tick waits for one tick, failing the test when none comes in time.
func tick(t *testing.T, ticks <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ticks:
	case <-time.After(deadline):
		t.Fatalf("no tick for %s within %s", what, deadline)
	}
}

// drain takes a pending tick, if any, so the next one is news.
func drain(ticks <-chan struct{}) {
	select {
	case <-ticks:
	default:
	}
}

// TestWatchServerAcrossReplicas: a watcher on one replica hears of a
// server's changes made on another (they come from PostgreSQL, not from
// the replica's memory): its commands, and its stop. Another user cannot
// watch it (404, as for every other call on it), and a user's watches are
// bounded.
func TestWatchServerAcrossReplicas(t *testing.T) {
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	a, _ := replica(t, url, "replica-a", orchtest.NewRuntime(t, agentBin, dir, nil))
	b, _ := replica(t, url, "replica-b", orchtest.NewRuntime(t, agentBin, dir, nil))
	orchtest.Run(t, a)
	orchtest.Run(t, b)
	ctx := context.Background()
	principal(t, a, "root") // the first user is admin
	alice, bob := principal(t, a, "alice"), principal(t, a, "bob")
	c := registerClient(t, a, alice, "watched")

	list, stopList, err := b.WatchServers(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	defer stopList()
	srv := startServer(t, a, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "base"})
	tick(t, list, "a new server in alice's list")

	ticks, stop, err := b.WatchServer(ctx, alice, srv.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	drain(ticks)
	bash(t, a, alice, srv.ServerID, "true", nil)
	tick(t, ticks, "a command's operation on replica a")

	drain(ticks)
	drain(list)
	if _, err := a.StopServer(ctx, alice, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
		t.Fatal(err)
	}
	tick(t, ticks, "the server's stop on replica a")
	tick(t, list, "the stop in alice's list")
	got, err := b.GetServer(ctx, alice, srv.ServerID)
	if err != nil || got.Status != orchestrator.ServerStopped {
		t.Fatalf("after the tick the server is %q (%v), want STOPPED", got.Status, err)
	}

	if _, _, err := b.WatchServer(ctx, bob, srv.ServerID); wire.DetailOf(err).Code != wire.CodeNotFound {
		t.Fatalf("bob watching alice's server: %v, want not_found", err)
	}

	// The bound: MaxWatchesPerUser at once (two are open already).
	var stops []func()
	for range orchestrator.MaxWatchesPerUser - 2 {
		_, s, err := b.WatchServer(ctx, alice, srv.ServerID)
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, s)
	}
	if _, _, err := b.WatchServer(ctx, alice, srv.ServerID); wire.DetailOf(err).Code != wire.CodeTooManyRequests {
		t.Fatalf("watch %d: %v, want too_many_requests", orchestrator.MaxWatchesPerUser+1, err)
	}
	if _, s, err := b.WatchServer(ctx, bob, ""); err == nil {
		s()
		t.Fatal("a watch of no server was accepted")
	}
	stops[0]()
	stops[0]() // stopping twice frees one place only
	_, s, err := b.WatchServer(ctx, alice, srv.ServerID)
	if err != nil {
		t.Fatalf("a watch after one stopped: %v", err)
	}
	s()
	if _, _, err := b.WatchServer(ctx, alice, srv.ServerID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.WatchServer(ctx, alice, srv.ServerID); wire.DetailOf(err).Code != wire.CodeTooManyRequests {
		t.Fatalf("stopping one watch twice freed two places: %v", err)
	}
}
