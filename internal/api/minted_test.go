package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// A token minted with another never outlives it: asked for 30 days with
// a parent that has 2 hours left, it gets those 2 hours. Revoking the
// parent revokes what it minted and what that minted in turn, at once;
// a token the parent did not mint keeps working.
func TestMintedTokenNeverOutlivesItsParent(t *testing.T) {
	e := newTestServer(t)
	ctx := context.Background()
	parent, parentTok, err := e.Svc.CreateToken(ctx, orchestrator.CreateTokenRequest{Username: "alice", Name: "parent", ExpiresIn: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(with, name string) orchestrator.CreatedToken {
		t.Helper()
		var c orchestrator.CreatedToken
		e.call(t, with, "POST", "/api/tokens", map[string]any{"name": name, "expires_in": 30 * 24 * 3600}, http.StatusOK, &c)
		return c
	}
	child := mint(parent, "child")
	if child.Token.ExpiresAt == nil || child.Token.ExpiresAt.After(*parentTok.ExpiresAt) {
		t.Fatalf("child expires at %v, after its parent (%v)", child.Token.ExpiresAt, parentTok.ExpiresAt)
	}
	grandchild := mint(child.Secret, "grandchild")
	if grandchild.Token.ExpiresAt.After(*child.Token.ExpiresAt) {
		t.Fatalf("grandchild expires at %v, after its parent (%v)", grandchild.Token.ExpiresAt, child.Token.ExpiresAt)
	}
	// Minted by a token that does not expire: the server's default.
	other := mint(e.alice, "sibling")
	if !other.Token.ExpiresAt.After(time.Now().Add(29 * 24 * time.Hour)) {
		t.Fatalf("a token minted by one without expiry expires at %v, want in 30 days", other.Token.ExpiresAt)
	}
	for _, tok := range []string{child.Secret, grandchild.Secret, other.Secret} {
		e.call(t, tok, "GET", "/api/whoami", nil, http.StatusOK, nil)
	}

	// The owner revokes the parent with another of their tokens.
	e.call(t, e.alice, "DELETE", "/api/tokens/"+parentTok.ID, nil, http.StatusOK, nil)
	for _, tok := range []string{parent, child.Secret, grandchild.Secret} {
		wantError(t, e.send(t, "GET", "/api/whoami", nil, bearer(tok)), http.StatusUnauthorized, "revoked")
	}
	e.call(t, other.Secret, "GET", "/api/whoami", nil, http.StatusOK, nil)
	// The listing says so.
	var list orchestrator.TokenList
	e.call(t, e.alice, "GET", "/api/tokens", nil, http.StatusOK, &list)
	state := map[string]string{}
	for _, tk := range list.Tokens {
		state[tk.ID] = tk.State
	}
	for name, id := range map[string]string{"child": child.Token.ID, "grandchild": grandchild.Token.ID} {
		if state[id] != orchestrator.TokenRevoked {
			t.Errorf("%s is listed %q after its parent was revoked, want revoked", name, state[id])
		}
	}
	if state[other.Token.ID] != orchestrator.TokenActive {
		t.Errorf("the sibling is listed %q, want active", state[other.Token.ID])
	}
}
