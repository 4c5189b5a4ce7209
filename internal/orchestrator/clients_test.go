package orchestrator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestClientLifecycle: finishing a client finishes its servers (they stay
// for reuse), a start revives it, and stopping it deletes every sandbox.
func TestClientLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	alice := principal(t, h.Svc, "alice")

	_, err := h.Svc.RegisterClient(ctx, alice, orchestrator.RegisterClientRequest{Name: "x", Namespace: "Not_A_Label"})
	wantCode(t, err, wire.CodeBadRequest, "namespace")
	_, err = h.Svc.RegisterClient(ctx, alice, orchestrator.RegisterClientRequest{Name: " "})
	wantCode(t, err, wire.CodeBadRequest, "name")
	c, err := h.Svc.RegisterClient(ctx, alice, orchestrator.RegisterClientRequest{Name: "nodes", NodesCount: 2})
	if err != nil || !strings.Contains(c.Notice, "nodes_count") {
		t.Fatalf("nodes_count on the local runtime: %+v %v, want a notice", c, err)
	}

	a := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "a"})
	b := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "b"})
	if hb, err := h.Svc.HeartbeatClient(ctx, alice, c.ID); err != nil || !hb.LastHeartbeatAt.After(c.LastHeartbeatAt) {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}

	fin, err := h.Svc.FinishClient(ctx, alice, c.ID)
	if err != nil || fin.Status != orchestrator.ClientFinished {
		t.Fatalf("finish client: %+v %v", fin, err)
	}
	for _, id := range []string{a.ServerID, b.ServerID} {
		srv, err := h.Svc.GetServer(ctx, alice, id)
		if err != nil || srv.Status != orchestrator.ServerFinished {
			t.Fatalf("server of a finished client: %+v %v", srv, err)
		}
	}
	again := startServer(t, h.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "a", ReuseStrategy: "RESET"})
	if again.ServerID != a.ServerID {
		t.Fatalf("reuse after finishing the client gave %s, want %s", again.ServerID, a.ServerID)
	}
	if got, err := h.Svc.GetClient(ctx, alice, c.ID); err != nil || got.Status != orchestrator.ClientAlive {
		t.Fatalf("client after a start: %+v %v, want ALIVE", got, err)
	}

	stopped, err := h.Svc.StopClient(ctx, alice, c.ID)
	if err != nil || stopped.Status != orchestrator.ClientStopped {
		t.Fatalf("stop client: %+v %v", stopped, err)
	}
	servers, err := h.Svc.ListServers(ctx, alice, c.ID)
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers of the client: %+v %v", servers, err)
	}
	for _, srv := range servers {
		if srv.Status != orchestrator.ServerStopped {
			t.Fatalf("server %s is %s after its client stopped", srv.ID, srv.Status)
		}
		if gone, err := sandboxGone(ctx, h.Runtime, srv.ID); err != nil || !gone {
			t.Fatalf("server %s kept its sandbox (%v)", srv.ID, err)
		}
	}
	_, err = h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	wantCode(t, err, wire.CodeConflict, "stopped")
	_, err = h.Svc.FinishClient(ctx, alice, c.ID)
	wantCode(t, err, wire.CodeConflict, "stopped")
}

// TestTokens: a revoked token stops working at once.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	tok, rec, err := h.Svc.CreateToken(ctx, orchestrator.CreateTokenRequest{Username: "alice", Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Svc.Authenticate(ctx, tok)
	if err != nil || p.Username != "alice" || p.TokenID != rec.ID {
		t.Fatalf("authenticate: %+v %v", p, err)
	}
	if err := h.Svc.RevokeToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.Authenticate(ctx, tok)
	wantCode(t, err, wire.CodeUnauthorized, "revoked")
	_, _, err = h.Svc.CreateToken(ctx, orchestrator.CreateTokenRequest{Username: "alice", Scopes: []string{"berth:everything"}})
	wantCode(t, err, wire.CodeBadRequest, "berth:everything")
}
