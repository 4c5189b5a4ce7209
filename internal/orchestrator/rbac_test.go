package orchestrator_test

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestAccessControl: other people's things do not exist for a member, a
// read-only token cannot change anything, and an admin sees everyone's.
func TestAccessControl(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	root := principal(t, h.Svc, "root") // the first user: global admin
	alice := principal(t, h.Svc, "alice")
	bob := principal(t, h.Svc, "bob")
	if !root.IsAdmin("") || alice.IsAdmin("default") || !slices.Contains(alice.RolesIn("default"), rbac.RoleMember) {
		t.Fatalf("roles: root %+v alice %+v", root.Bindings, alice.Bindings)
	}

	c := registerClient(t, h.Svc, alice, "alices")
	op, err := h.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatal(err)
	}
	srv := startResult(t, op)
	bobs := registerClient(t, h.Svc, bob, "bobs")

	// Bob: 404 on each of Alice's things, as if they did not exist.
	_, err = h.Svc.GetClient(ctx, bob, c.ID)
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetServer(ctx, bob, srv.ServerID)
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetOperation(ctx, bob, op.ID, 0)
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.SessionExec(ctx, bob, srv.ServerID, "", wireExec("true"))
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.RunBashCommand(ctx, bob, orchestrator.RunBashRequest{ServerID: srv.ServerID, Command: "true"})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.StopServer(ctx, bob, orchestrator.ServerRef{ServerID: srv.ServerID})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.StartServer(ctx, bob, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.ForwardTarget(ctx, bob, "", srv.ServerID, "api/fs/ls")
	wantCode(t, err, wire.CodeNotFound)
	// Alice's server named under Bob's client is not found either.
	_, err = h.Svc.SessionExec(ctx, alice, srv.ServerID, "", wireExec("true"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ClientID: bobs.ID, ServerID: srv.ServerID})
	wantCode(t, err, wire.CodeNotFound)
	if list, err := h.Svc.ListClients(ctx, bob); err != nil || len(list) != 1 || list[0].ID != bobs.ID {
		t.Fatalf("bob's clients: %+v %v", list, err)
	}
	if list, err := h.Svc.ListServers(ctx, bob, ""); err != nil || len(list) != 0 {
		t.Fatalf("bob's servers: %+v %v", list, err)
	}

	// A read-only token reads but changes nothing: 403 naming the scope.
	aliceRO := principal(t, h.Svc, "alice", string(rbac.ScopeRead))
	if _, err := h.Svc.GetServer(ctx, aliceRO, srv.ServerID); err != nil {
		t.Fatalf("read-only read: %v", err)
	}
	_, err = h.Svc.StartServer(ctx, aliceRO, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
	wantCode(t, err, wire.CodeForbidden, string(rbac.ScopeWrite))
	_, err = h.Svc.RegisterClient(ctx, aliceRO, orchestrator.RegisterClientRequest{Name: "ro"})
	wantCode(t, err, wire.CodeForbidden, string(rbac.ScopeWrite))
	_, err = h.Svc.SessionExec(ctx, aliceRO, srv.ServerID, "", wireExec("true"))
	wantCode(t, err, wire.CodeForbidden, string(rbac.ScopeExec))
	_, err = h.Svc.StopServer(ctx, aliceRO, orchestrator.ServerRef{ServerID: srv.ServerID})
	wantCode(t, err, wire.CodeForbidden, string(rbac.ScopeWrite))
	// Refused changes are audited; refused reads are not.
	denied, err := h.Store.ListAudit(ctx, store.AuditFilter{ActorID: alice.UserID})
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, e := range denied {
		if e.Outcome == store.OutcomeDenied && e.TokenID == aliceRO.TokenID {
			refused++
		}
	}
	if refused < 3 {
		t.Fatalf("%d denied entries for the read-only token, want one per refused change", refused)
	}

	// The admin sees and reaches everyone's.
	clients, err := h.Svc.ListClients(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, cl := range clients {
		ids = append(ids, cl.ID)
	}
	if !slices.Contains(ids, c.ID) || !slices.Contains(ids, bobs.ID) {
		t.Fatalf("admin's clients %v lack alice's %s or bob's %s", ids, c.ID, bobs.ID)
	}
	servers, err := h.Svc.ListServers(ctx, root, "")
	if err != nil || len(servers) != 1 || servers[0].ID != srv.ServerID {
		t.Fatalf("admin's servers: %+v %v", servers, err)
	}
	if _, err := h.Svc.GetOperation(ctx, root, op.ID, 0); err != nil {
		t.Fatalf("admin reads alice's operation: %v", err)
	}
	if got := sessionExec(t, h.Svc, root, srv.ServerID, "", "echo admin"); got.Stdout != "admin\n" {
		t.Fatalf("admin exec: %q", got.Stdout)
	}
	if _, err := h.Svc.StopServer(ctx, root, orchestrator.ServerRef{ServerID: srv.ServerID}); err != nil {
		t.Fatalf("admin stops alice's server: %v", err)
	}
}
