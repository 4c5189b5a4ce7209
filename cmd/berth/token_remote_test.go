package main

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/auth"
)

// TestTokenRemote drives `berth token --remote` against a real server with
// a member's own credentials: a token is minted for the caller only,
// never wider than the credential, listed without its secret, and
// revoked so that it stops working.
func TestTokenRemote(t *testing.T) {
	isolateHome(t)
	url, e := startServer(t)
	e.Token(t, "root") // the first user is the admin; alice is a member
	tok, _ := e.Token(t, "alice", "berth:read", "berth:write")
	env := envMap("BERTH_URL", url, "BERTH_TOKEN", tok)

	made := berth(t, env, nil, "token", "create", "--remote", "--name", "ci", "--scopes", "berth:read", "--expires", "2h")
	secret := strings.TrimSpace(made.stdout)
	if made.err != nil || !auth.LooksLikeToken(secret) || strings.Count(made.stdout, "\n") != 1 {
		t.Fatalf("create --remote: %v stdout=%q stderr=%q", made.err, made.stdout, made.stderr)
	}
	p, err := e.Svc.Authenticate(context.Background(), secret)
	if err != nil || p.Username != "alice" || len(p.Scopes) != 1 {
		t.Fatalf("the remote token is %+v, %v; want alice with berth:read", p, err)
	}

	wider := berth(t, env, nil, "token", "create", "--remote", "--scopes", "berth:exec")
	if wider.err == nil || !strings.Contains(wider.err.Error(), "berth:exec") {
		t.Fatalf("a token wider than the credential: %v %q", wider.err, wider.stdout)
	}
	if r := berth(t, env, nil, "token", "create", "--remote", "--user", "bob"); r.err == nil || !strings.Contains(r.err.Error(), "--user") {
		t.Fatalf("--remote with --user: %v", r.err)
	}
	if r := berth(t, env, nil, "token", "list", "--remote", "--all"); r.err == nil || !strings.Contains(r.err.Error(), "denied") {
		t.Fatalf("a member listing everyone's tokens: %v", r.err)
	}

	list := berth(t, env, nil, "token", "list", "--remote")
	if list.err != nil || !strings.Contains(list.stdout, "ci") || strings.Contains(list.stdout, secret) {
		t.Fatalf("list --remote: %v %q", list.err, list.stdout)
	}
	var id string
	for _, line := range strings.Split(list.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[3] == "ci" {
			id = f[0]
		}
	}
	if id == "" {
		t.Fatalf("no row for the ci token in %q", list.stdout)
	}
	if r := berth(t, env, nil, "token", "revoke", "--remote", id); r.err != nil || !strings.Contains(r.stderr, "revoked") {
		t.Fatalf("revoke --remote: %v %q", r.err, r.stderr)
	}
	if _, err := e.Svc.Authenticate(context.Background(), secret); err == nil {
		t.Fatal("the revoked token still authenticates")
	}
	if r := berth(t, env, nil, "token", "revoke", "--remote", "7d0e0a4c-0000-4000-8000-000000000000"); r.err == nil || !strings.Contains(r.err.Error(), "not found") {
		t.Fatalf("revoking an unknown token: %v", r.err)
	}
}
