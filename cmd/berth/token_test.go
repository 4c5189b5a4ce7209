package main

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestTokenAndUserCommands drives `berth token` and `berth user` against a
// real database the way an operator would, then checks the tokens work.
func TestTokenAndUserCommands(t *testing.T) {
	url := storetest.URL(t)
	env := envMap("BERTH_DATABASE_URL", url)

	admin := berth(t, env, nil, "token", "create", "--user", "Root", "--name", "laptop")
	if admin.err != nil || !auth.LooksLikeToken(strings.TrimSpace(admin.stdout)) {
		t.Fatalf("token create: %v stdout=%q stderr=%q", admin.err, admin.stdout, admin.stderr)
	}
	if strings.Count(admin.stdout, "\n") != 1 {
		t.Fatalf("stdout must hold only the token, got %q", admin.stdout)
	}
	member := berth(t, env, nil, "token", "create", "--user", "bob", "--scopes", "berth:read", "--expires", "1h")
	if member.err != nil {
		t.Fatal(member.err)
	}

	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := orchestrator.NewIdentity(st, "", nil)
	p, err := id.Authenticate(context.Background(), strings.TrimSpace(admin.stdout))
	if err != nil || p.Username != "root" || !p.IsAdmin("") {
		t.Fatalf("first user: %+v %v", p, err)
	}
	bob, err := id.Authenticate(context.Background(), strings.TrimSpace(member.stdout))
	if err != nil || bob.IsAdmin("") || len(bob.Scopes) != 1 {
		t.Fatalf("second user: %+v %v", bob, err)
	}

	list := berth(t, env, nil, "token", "list", "--user", "bob")
	if list.err != nil || !strings.Contains(list.stdout, "berth:read") || strings.Contains(list.stdout, strings.TrimSpace(member.stdout)) {
		t.Fatalf("token list: %v %q", list.err, list.stdout)
	}
	if r := berth(t, env, nil, "user", "grant", "--user", "bob", "--role", "admin", "--namespace", "team-a"); r.err != nil {
		t.Fatalf("grant: %v %s", r.err, r.stderr)
	}
	if r := berth(t, env, nil, "user", "grant", "--user", "bob", "--role", "owner"); r.err == nil || !strings.Contains(r.err.Error(), "owner") {
		t.Fatalf("grant of an unknown role: %v", r.err)
	}
	tokID := strings.Fields(strings.Split(list.stdout, "\n")[1])[0]
	if r := berth(t, env, nil, "token", "revoke", tokID); r.err != nil {
		t.Fatalf("revoke: %v", r.err)
	}
	if _, err := orchestrator.NewIdentity(st, "", nil).Authenticate(context.Background(), strings.TrimSpace(member.stdout)); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked token still works: %v", err)
	}
	if r := berth(t, env, nil, "token", "create"); r.err == nil || !strings.Contains(r.err.Error(), "--user") {
		t.Fatalf("create without --user: %v", r.err)
	}
}
