package orchestrator_test

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestUserAdministration(t *testing.T) {
	e := newService(t, orchestrator.Config{MaxServersPerUser: 4})
	svc := e.Svc
	ctx := context.Background()
	admin := principal(t, svc, "root")
	alice := principal(t, svc, "alice")

	_, err := svc.ListUsers(ctx, alice)
	wantCode(t, err, wire.CodeForbidden)
	_, err = svc.GrantRole(ctx, alice, orchestrator.RoleBindingInput{User: "alice", Role: "admin"})
	wantCode(t, err, wire.CodeForbidden)

	users, err := svc.ListUsers(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if users.Quotas.MaxServersPerUser != 4 || len(users.Users) != 2 {
		t.Fatalf("list_users: %+v", users)
	}
	roleOf := func(name string) []orchestrator.RoleIn {
		users, err := svc.ListUsers(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users.Users {
			if u.Username == name {
				return u.Roles
			}
		}
		t.Fatalf("no user %s", name)
		return nil
	}
	if got := roleOf("alice"); !slices.Equal(got, []orchestrator.RoleIn{{Role: "member", Namespace: "default"}}) {
		t.Errorf("alice's roles %v", got)
	}

	if _, err := svc.GrantRole(ctx, admin, orchestrator.RoleBindingInput{User: "alice", Role: "admin", Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if got := roleOf("alice"); !slices.Contains(got, orchestrator.RoleIn{Role: "admin", Namespace: "team-a"}) {
		t.Errorf("after the grant alice has %v", got)
	}
	// The grant takes effect on alice's next request through this replica.
	p, err := svc.BrowserPrincipal(ctx, alice.UserID)
	if err != nil || !p.IsAdmin("team-a") {
		t.Errorf("alice is not admin of team-a after the grant: %v", err)
	}
	if _, err := svc.RevokeRole(ctx, admin, orchestrator.RoleBindingInput{User: "alice", Role: "admin", Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if got := roleOf("alice"); slices.Contains(got, orchestrator.RoleIn{Role: "admin", Namespace: "team-a"}) {
		t.Errorf("after the revoke alice still has %v", got)
	}

	_, err = svc.GrantRole(ctx, admin, orchestrator.RoleBindingInput{User: "alice", Role: "owner"})
	wantCode(t, err, wire.CodeBadRequest, "owner")
	_, err = svc.GrantRole(ctx, admin, orchestrator.RoleBindingInput{User: "nobody", Role: "member"})
	wantCode(t, err, wire.CodeNotFound)
	_, err = svc.GrantRole(ctx, admin, orchestrator.RoleBindingInput{User: "alice", Group: "devs", Role: "member"})
	wantCode(t, err, wire.CodeBadRequest, "exactly one")
	_, err = svc.RevokeRole(ctx, admin, orchestrator.RoleBindingInput{User: "root", Role: "admin"})
	wantCode(t, err, wire.CodeConflict, "your own")

	bs, err := svc.ListRoleBindings(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(bs.Bindings, func(b orchestrator.RoleBinding) bool {
		return b.Subject == "root" && b.Role == "admin" && b.Namespace == ""
	}) {
		t.Errorf("bindings %+v lack root's global admin", bs.Bindings)
	}
}
