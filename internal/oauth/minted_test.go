package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// A session token minted with an OAuth access token (create_token, as an
// agent in VS Code would call it) expires no later than that access token
// and is revoked with it: when the client revokes the access token, and
// when the user's authorization ends (the refresh token revoked, which
// revokes the grant).
func TestTokenMintedWithOAuthFollowsIt(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Agent Editor")
	b := e.browser(t, "alice")
	authorize := func() tokenResp {
		p := newPKCE(t)
		return mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))
	}
	mint := func(accessToken string) orchestrator.CreatedToken {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+"/api/tokens", strings.NewReader(`{"name":"script","expires_in":2592000}`))
		req.Header.Set("Authorization", "Bearer "+accessToken)
		req.Header.Set("Content-Type", "application/json")
		var c orchestrator.CreatedToken
		if resp, body := e.do(t, req, &c); resp.StatusCode != 200 {
			t.Fatalf("create_token with an access token: %d %s", resp.StatusCode, body)
		}
		return c
	}
	revoke := func(token string) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.url+"/oauth/revoke", strings.NewReader(url.Values{"token": {token}, "client_id": {reg.ClientID}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, body := e.do(t, req, nil); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d %s", resp.StatusCode, body)
		}
	}
	works := func(what, secret string, want int) {
		t.Helper()
		if status, _, h := e.whoami(t, secret); status != want {
			t.Errorf("%s: whoami answered %d (%s), want %d", what, status, h.Get("WWW-Authenticate"), want)
		}
	}

	first := authorize()
	minted := mint(first.AccessToken)
	if limit := e.clock.now().Add(time.Duration(first.ExpiresIn)*time.Second + time.Minute); minted.Token.ExpiresAt == nil || minted.Token.ExpiresAt.After(limit) {
		t.Fatalf("minted token expires at %v, after its access token (%v)", minted.Token.ExpiresAt, limit)
	}
	works("minted token", minted.Secret, 200)
	revoke(first.AccessToken)
	works("token minted with a revoked access token", minted.Secret, 401)

	second := authorize()
	minted = mint(second.AccessToken)
	works("second minted token", minted.Secret, 200)
	revoke(second.RefreshToken) // ends the grant, its access token with it
	works("token minted under a revoked grant", minted.Secret, 401)
}
