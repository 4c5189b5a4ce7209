package orchestrator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestSelfServiceTokens(t *testing.T) {
	e := newService(t, orchestrator.Config{TokenDefaultTTL: 48 * time.Hour, TokenMaxTTL: 7 * 24 * time.Hour})
	svc := e.Svc
	ctx := context.Background()
	admin := principal(t, svc, "root")
	alice := principal(t, svc, "alice")
	bob := principal(t, svc, "bob")

	// Defaults: read, write and exec (what a member's credential holds),
	// and the configured default lifetime.
	before := time.Now()
	created, err := svc.CreateMyToken(ctx, alice, orchestrator.CreateTokenInput{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.Token.Scopes; !slices.Equal(got, []string{"berth:read", "berth:write", "berth:exec"}) {
		t.Errorf("default scopes %v", got)
	}
	if exp := created.Token.ExpiresAt; exp == nil || exp.Before(before.Add(47*time.Hour)) || exp.After(time.Now().Add(49*time.Hour)) {
		t.Errorf("default expiry %v, want about 48h from now", exp)
	}
	if !strings.HasPrefix(created.Secret, created.Token.Prefix) || created.Token.State != orchestrator.TokenActive {
		t.Errorf("token %+v does not describe its secret", created.Token)
	}
	// The secret works, as alice, with exactly the token's scopes.
	p, err := svc.Authenticate(ctx, created.Secret)
	if err != nil || p.UserID != alice.UserID {
		t.Fatalf("the new token authenticates as %q: %v", p.Username, err)
	}

	// Never more than the credential or the roles allow.
	_, err = svc.CreateMyToken(ctx, alice, orchestrator.CreateTokenInput{Name: "x", Scopes: []string{"berth:admin"}})
	wantCode(t, err, wire.CodeForbidden, "berth:admin")
	writeOnly := principal(t, svc, "alice", "berth:write")
	_, err = svc.CreateMyToken(ctx, writeOnly, orchestrator.CreateTokenInput{Name: "x", Scopes: []string{"berth:exec"}})
	wantCode(t, err, wire.CodeForbidden, "berth:exec", "credential")
	if tk, err := svc.CreateMyToken(ctx, writeOnly, orchestrator.CreateTokenInput{Name: "x"}); err != nil || !slices.Equal(tk.Token.Scopes, []string{"berth:read", "berth:write"}) {
		t.Errorf("write-only credential's default token: %v %v", tk.Token.Scopes, err)
	}
	readOnly := principal(t, svc, "alice", "berth:read")
	_, err = svc.CreateMyToken(ctx, readOnly, orchestrator.CreateTokenInput{Name: "x", Scopes: []string{"berth:read"}})
	wantCode(t, err, wire.CodeForbidden, "berth:write")
	if tk, err := svc.CreateMyToken(ctx, admin, orchestrator.CreateTokenInput{Name: "ops", Scopes: []string{"berth:admin"}}); err != nil || !slices.Equal(tk.Token.Scopes, []string{"berth:admin"}) {
		t.Errorf("admin's admin token: %v %v", tk.Token.Scopes, err)
	}

	// Bad input names what was wrong.
	for _, c := range []struct {
		in    orchestrator.CreateTokenInput
		words []string
	}{
		{orchestrator.CreateTokenInput{Name: " "}, []string{"name"}},
		{orchestrator.CreateTokenInput{Name: strings.Repeat("n", 65)}, []string{"name", "64"}},
		{orchestrator.CreateTokenInput{Name: "a\nb"}, []string{"control"}},
		{orchestrator.CreateTokenInput{Name: "x", Scopes: []string{"berth:root"}}, []string{"berth:root"}},
		{orchestrator.CreateTokenInput{Name: "x", ExpiresIn: -5}, []string{"expires_in"}},
		{orchestrator.CreateTokenInput{Name: "x", ExpiresIn: 8 * 24 * 3600}, []string{"expires_in", "604800", "7 days"}},
	} {
		_, err := svc.CreateMyToken(ctx, alice, c.in)
		wantCode(t, err, wire.CodeBadRequest, c.words...)
	}

	// Listing: one's own only; everyone's for admins.
	bobs, err := svc.CreateMyToken(ctx, bob, orchestrator.CreateTokenInput{Name: "bob-ci", ExpiresIn: 3600})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := svc.ListMyTokens(ctx, alice, orchestrator.ListTokensInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range mine.Tokens {
		if tk.UserID != alice.UserID {
			t.Errorf("alice's list holds %s's token %s", tk.Username, tk.ID)
		}
	}
	_, err = svc.ListMyTokens(ctx, alice, orchestrator.ListTokensInput{All: true})
	wantCode(t, err, wire.CodeForbidden)
	all, err := svc.ListMyTokens(ctx, admin, orchestrator.ListTokensInput{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(all.Tokens, func(tk orchestrator.Token) bool { return tk.ID == bobs.Token.ID && tk.Username == "bob" }) {
		t.Error("admin's list lacks bob's token")
	}

	// Revoking: another member's token does not exist for alice; her own
	// stops working at once; an admin revokes anyone's.
	_, err = svc.RevokeMyToken(ctx, alice, orchestrator.TokenRef{TokenID: bobs.Token.ID})
	wantCode(t, err, wire.CodeNotFound)
	if _, err := svc.Authenticate(ctx, bobs.Secret); err != nil {
		t.Fatalf("bob's token stopped working after alice's refused revoke: %v", err)
	}
	rev, err := svc.RevokeMyToken(ctx, alice, orchestrator.TokenRef{TokenID: created.Token.ID})
	if err != nil || rev.State != orchestrator.TokenRevoked {
		t.Fatalf("revoke own: %+v %v", rev, err)
	}
	_, err = svc.Authenticate(ctx, created.Secret)
	wantCode(t, err, wire.CodeUnauthorized, "revoked")
	if _, err := svc.RevokeMyToken(ctx, alice, orchestrator.TokenRef{TokenID: created.Token.ID}); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if _, err := svc.RevokeMyToken(ctx, admin, orchestrator.TokenRef{TokenID: bobs.Token.ID}); err != nil {
		t.Fatalf("admin revokes bob's: %v", err)
	}
	_, err = svc.Authenticate(ctx, bobs.Secret)
	wantCode(t, err, wire.CodeUnauthorized, "revoked")
	_, err = svc.RevokeMyToken(ctx, alice, orchestrator.TokenRef{TokenID: "not-an-id"})
	wantCode(t, err, wire.CodeNotFound)

	// The audit log says who did it.
	page, err := svc.AuditLog(ctx, admin, orchestrator.AuditQuery{Action: "token.revoke", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]bool{}
	for _, en := range page.Entries {
		actors[en.Username] = true
	}
	if !actors["alice"] || !actors["root"] {
		t.Errorf("token.revoke audited for %v, want alice and root", actors)
	}
}
