package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/oauth"
)

// issued counts what the authorization server handed out: grants (one per
// code) and tokens.
func (e *env) issued(t *testing.T) [2]int {
	return [2]int{e.count(t, "oauth_grants"), e.count(t, "oauth_tokens")}
}

// TestAuthorizeRefusals: requests that must not produce a code. Errors
// before the redirect URI is trusted show a page; later ones go back to
// the client with state and iss.
func TestAuthorizeRefusals(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Neg")
	b := e.browser(t, "frank")
	// Sign in once so that every case reaches the checks past login.
	b.code(e.authParams(reg.ClientID, newPKCE(t)))
	before := e.issued(t)

	cases := []struct {
		name   string
		modify func(url.Values)
		page   bool // answered on an error page, not by redirect
		code   string
	}{
		{"missing PKCE", func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, false, "invalid_request"},
		{"missing challenge method", func(v url.Values) { v.Del("code_challenge_method") }, false, "invalid_request"},
		{"plain PKCE", func(v url.Values) { v.Set("code_challenge_method", "plain") }, false, "invalid_request"},
		{"short challenge", func(v url.Values) { v.Set("code_challenge", "abc") }, false, "invalid_request"},
		{"redirect_uri mismatch", func(v url.Values) { v.Set("redirect_uri", "https://evil.example/cb") }, true, "invalid_request"},
		{"redirect_uri other path", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:33418/other") }, true, "invalid_request"},
		{"missing redirect_uri", func(v url.Values) { v.Del("redirect_uri") }, true, "invalid_request"},
		{"unknown client", func(v url.Values) { v.Set("client_id", "berth_client_nope") }, true, "invalid_client"},
		{"missing client", func(v url.Values) { v.Del("client_id") }, true, "invalid_request"},
		{"http client_id URL", func(v url.Values) { v.Set("client_id", "http://client.example/meta.json") }, true, "invalid_client"},
		{"repeated client_id", func(v url.Values) { v.Add("client_id", "x") }, true, "invalid_request"},
		{"wrong response type", func(v url.Values) { v.Set("response_type", "token") }, false, "unsupported_response_type"},
		{"missing resource", func(v url.Values) { v.Del("resource") }, false, "invalid_target"},
		{"another resource", func(v url.Values) { v.Set("resource", "https://other.example/mcp") }, false, "invalid_target"},
		{"resource with fragment", func(v url.Values) { v.Set("resource", e.url+"/mcp#x") }, false, "invalid_target"},
		{"unknown scope", func(v url.Values) { v.Set("scope", "berth:read openid") }, false, "invalid_scope"},
		{"repeated scope", func(v url.Values) { v.Add("scope", "berth:read") }, false, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := e.authParams(reg.ClientID, newPKCE(t))
			c.modify(v)
			res := b.authorize(v)
			if c.page {
				if res.redirect != nil || res.status != 400 || !strings.Contains(res.page, c.code) {
					t.Fatalf("want an error page with %s, got %+v", c.code, res)
				}
				return
			}
			if res.redirect == nil {
				t.Fatalf("want a redirect with error %s, got page %d %s", c.code, res.status, res.page)
			}
			q := res.redirect.Query()
			if q.Get("error") != c.code || q.Get("error_description") == "" || q.Get("code") != "" ||
				q.Get("state") != v.Get("state") || q.Get("iss") != e.as.Issuer() {
				t.Fatalf("redirect %s: want error %s with state and iss", res.redirect, c.code)
			}
		})
	}
	// Normalization: the resource may differ in case, default port or
	// trailing slash.
	v := e.authParams(reg.ClientID, newPKCE(t))
	v.Set("resource", strings.Replace(e.url, "http://", "HTTP://", 1)+"/mcp/")
	b.code(v)
	if got := e.issued(t); got[0] != before[0]+1 || got[1] != before[1] {
		t.Fatalf("refused requests issued something: before %v, after %v", before, got)
	}

	// Denying consent.
	d := e.browser(t, "gina")
	d.answer = "deny"
	res := d.authorize(e.authParams(reg.ClientID, newPKCE(t)))
	if res.redirect == nil || res.redirect.Query().Get("error") != "access_denied" {
		t.Fatalf("deny: %+v", res)
	}
	// prompt=none without a session.
	v = e.authParams(reg.ClientID, newPKCE(t))
	v.Set("prompt", "none")
	if res := e.browser(t, "x").authorize(v); res.redirect == nil || res.redirect.Query().Get("error") != "login_required" {
		t.Fatalf("prompt=none: %+v", res)
	}
}

func TestTokenRefusals(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Neg")
	other := e.registerPublic(t, "Other")
	b := e.browser(t, "hank")

	t.Run("wrong verifier", func(t *testing.T) {
		p := newPKCE(t)
		code := b.code(e.authParams(reg.ClientID, p))
		before := e.issued(t)
		wantOAuthError(t, e.exchange(t, reg.ClientID, code, newPKCE(t)), 400, "invalid_grant")
		// The right verifier still works: a failed guess does not burn the code.
		mustToken(t, e.exchange(t, reg.ClientID, code, p))
		if got := e.issued(t); got[1] != before[1]+2 {
			t.Fatalf("tokens: %v -> %v", before, got)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		p := newPKCE(t)
		code := b.code(e.authParams(reg.ClientID, p))
		before := e.issued(t)
		base := func() url.Values {
			return url.Values{"grant_type": {"authorization_code"}, "client_id": {reg.ClientID}, "code": {code},
				"redirect_uri": {testRedirect}, "code_verifier": {p.verifier}}
		}
		for _, c := range []struct {
			name   string
			modify func(url.Values)
			status int
			code   string
		}{
			{"redirect_uri mismatch", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:1/callback") }, 400, "invalid_grant"},
			{"missing verifier", func(v url.Values) { v.Del("code_verifier") }, 400, "invalid_request"},
			{"malformed verifier", func(v url.Values) { v.Set("code_verifier", "short") }, 400, "invalid_request"},
			{"missing code", func(v url.Values) { v.Del("code") }, 400, "invalid_request"},
			{"unknown code", func(v url.Values) { v.Set("code", "berth_ac_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") }, 400, "invalid_grant"},
			{"code of another client", func(v url.Values) { v.Set("client_id", other.ClientID) }, 400, "invalid_grant"},
			{"other resource", func(v url.Values) { v.Set("resource", "https://other.example") }, 400, "invalid_target"},
			{"our other resource", func(v url.Values) { v.Set("resource", e.url) }, 400, "invalid_target"},
			{"unknown client", func(v url.Values) { v.Set("client_id", "berth_client_nope") }, 401, "invalid_client"},
			{"no client", func(v url.Values) { v.Del("client_id") }, 401, "invalid_client"},
			{"secret for a public client", func(v url.Values) { v.Set("client_secret", "x") }, 401, "invalid_client"},
			{"unsupported grant", func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
			{"missing grant", func(v url.Values) { v.Del("grant_type") }, 400, "invalid_request"},
			{"repeated parameter", func(v url.Values) { v.Add("code", "x") }, 400, "invalid_request"},
		} {
			v := base()
			c.modify(v)
			tr := e.token(t, v)
			if tr.status != c.status || tr.Error != c.code || tr.AccessToken != "" || tr.Description == "" {
				t.Errorf("%s: want %d %s, got %d %q (%s)", c.name, c.status, c.code, tr.status, tr.Error, tr.Description)
			}
		}
		if got := e.issued(t); got != before {
			t.Fatalf("refused token requests issued something: %v -> %v", before, got)
		}
		mustToken(t, e.exchange(t, reg.ClientID, code, p))
	})
	t.Run("malformed bodies", func(t *testing.T) {
		before := e.issued(t)
		for _, c := range []struct {
			name, method, ctype, body string
			status                    int
		}{
			{"json body", "POST", "application/json", `{"grant_type":"authorization_code"}`, 400},
			{"broken form", "POST", "application/x-www-form-urlencoded", "grant_type=%zz", 400},
			{"huge form", "POST", "application/x-www-form-urlencoded", "grant_type=" + strings.Repeat("a", 70<<10), 413},
			{"GET", "GET", "", "", 405},
		} {
			req, _ := http.NewRequest(c.method, e.url+"/oauth/token", strings.NewReader(c.body))
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			resp, body := e.do(t, req, nil)
			if resp.StatusCode != c.status || (c.status != 405 && !strings.Contains(string(body), `"error":"invalid_request"`)) {
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
			}
		}
		if got := e.issued(t); got != before {
			t.Fatalf("malformed requests issued something: %v -> %v", before, got)
		}
	})
	t.Run("reused code revokes its tokens", func(t *testing.T) {
		p := newPKCE(t)
		code := b.code(e.authParams(reg.ClientID, p))
		tok := mustToken(t, e.exchange(t, reg.ClientID, code, p))
		before := e.issued(t)
		wantOAuthError(t, e.exchange(t, reg.ClientID, code, p), 400, "invalid_grant")
		if got := e.issued(t); got != before {
			t.Fatalf("a reused code issued something: %v -> %v", before, got)
		}
		if status, _, _ := e.whoami(t, tok.AccessToken); status != 401 {
			t.Fatalf("access token from a reused code still works: %d", status)
		}
		wantOAuthError(t, e.refresh(t, reg.ClientID, tok.RefreshToken), 400, "invalid_grant")
	})
	t.Run("reused refresh token revokes the family", func(t *testing.T) {
		p := newPKCE(t)
		tok := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))
		next := mustToken(t, e.refresh(t, reg.ClientID, tok.RefreshToken))
		before := e.issued(t)
		wantOAuthError(t, e.refresh(t, reg.ClientID, tok.RefreshToken), 400, "invalid_grant")
		if got := e.issued(t); got != before {
			t.Fatalf("a replayed refresh token issued something: %v -> %v", before, got)
		}
		for _, at := range []string{tok.AccessToken, next.AccessToken} {
			if status, _, _ := e.whoami(t, at); status != 401 {
				t.Fatalf("access token of a revoked family still works: %d", status)
			}
		}
		wantOAuthError(t, e.refresh(t, reg.ClientID, next.RefreshToken), 400, "invalid_grant")
	})
	t.Run("refresh token of another client", func(t *testing.T) {
		p := newPKCE(t)
		tok := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))
		wantOAuthError(t, e.refresh(t, other.ClientID, tok.RefreshToken), 400, "invalid_grant")
		mustToken(t, e.refresh(t, reg.ClientID, tok.RefreshToken))
	})
	t.Run("concurrent refresh", func(t *testing.T) {
		p := newPKCE(t)
		tok := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))
		var wg sync.WaitGroup
		results := make([]tokenResp, 4)
		for i := range results {
			wg.Go(func() { results[i] = e.refresh(t, reg.ClientID, tok.RefreshToken) })
		}
		wg.Wait()
		ok := 0
		for _, r := range results {
			if r.status == 200 {
				ok++
			}
		}
		// One wins; the others are replays, which revoke the family.
		if ok != 1 {
			t.Fatalf("%d of %d concurrent refreshes succeeded, want 1", ok, len(results))
		}
	})
}

func TestTokenLifetimes(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Clock")
	b := e.browser(t, "ivan")

	p := newPKCE(t)
	code := b.code(e.authParams(reg.ClientID, p))
	e.clock.advance(61 * time.Second)
	wantOAuthError(t, e.exchange(t, reg.ClientID, code, p), 400, "invalid_grant")

	p = newPKCE(t)
	tok := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))
	e.clock.advance(time.Hour + time.Second)
	status, _, h := e.whoami(t, tok.AccessToken)
	if status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) || !strings.Contains(h.Get("WWW-Authenticate"), "expired") {
		t.Fatalf("expired access token: %d %q", status, h.Get("WWW-Authenticate"))
	}
	// The refresh token outlives it.
	fresh := mustToken(t, e.refresh(t, reg.ClientID, tok.RefreshToken))
	if status, _, _ := e.whoami(t, fresh.AccessToken); status != 200 {
		t.Fatalf("refreshed token: %d", status)
	}
	e.clock.advance(31 * 24 * time.Hour)
	wantOAuthError(t, e.refresh(t, reg.ClientID, fresh.RefreshToken), 400, "invalid_grant")
}

// TestAudience: a token issued by the same berth database for another
// resource (another public URL) is refused.
func TestAudience(t *testing.T) {
	a := newEnv(t, nil)
	other := newEnvOn(t, a.orch, nil)
	reg := other.registerPublic(t, "Elsewhere")
	p := newPKCE(t)
	tok := mustToken(t, other.exchange(t, reg.ClientID, other.browser(t, "judy").code(other.authParams(reg.ClientID, p)), p))
	if status, _, _ := other.whoami(t, tok.AccessToken); status != 200 {
		t.Fatalf("token at its own resource: %d", status)
	}
	status, _, h := a.whoami(t, tok.AccessToken)
	ch := h.Get("WWW-Authenticate")
	if status != 401 || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, "another resource") {
		t.Fatalf("token for another resource: %d %q", status, ch)
	}
	if _, err := a.listTools(t, tok.AccessToken); err == nil {
		t.Fatal("/mcp accepted a token for another resource")
	}
	// Session tokens and other credential kinds are not this
	// authenticator's business.
	if _, err := a.as.Authenticate(t.Context(), "berth_something"); err == nil || !strings.Contains(err.Error(), "not recognized") {
		t.Fatalf("foreign credential: %v", err)
	}
	if _, err := a.as.Authenticate(t.Context(), oauth.AccessTokenPrefix+strings.Repeat("A", 43)); err == nil {
		t.Fatal("unknown access token accepted")
	}
}

func TestInsufficientScope(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Reader")
	p := newPKCE(t)
	v := e.authParams(reg.ClientID, p)
	v.Set("scope", "berth:read")
	tok := mustToken(t, e.exchange(t, reg.ClientID, e.browser(t, "kim").code(v), p))
	req, _ := http.NewRequest("POST", e.url+"/api/clients", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	resp, body := e.do(t, req, nil)
	ch := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 403 || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="berth:write berth:read"`) ||
		!strings.Contains(ch, `resource_metadata="`+e.url+`/.well-known/oauth-protected-resource"`) {
		t.Fatalf("read-only token creating a client: %d %q %s", resp.StatusCode, ch, body)
	}
}

func TestLoginCSRF(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "CSRF")
	b := e.browser(t, "lena")
	resp, err := b.c.Get(e.url + "/oauth/authorize?" + e.authParams(reg.ClientID, newPKCE(t)).Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := resp.Location()
	handle := loc.Query().Get("request")
	// A form posted without the login page's token (a cross-site form).
	resp, err = b.c.PostForm(e.url+"/oauth/login", url.Values{"username": {"mallory"}, "request": {handle}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("login without CSRF token: %d", resp.StatusCode)
	}
	if n := e.count(t, "oauth_browser_sessions"); n != 0 {
		t.Fatalf("%d sessions after a refused login", n)
	}
	// Bad usernames are refused on the form.
	res := e.browser(t, "Bad Name!").authorize(e.authParams(reg.ClientID, newPKCE(t)))
	if res.status != 400 || !strings.Contains(res.page, "user name") {
		t.Fatalf("bad username: %+v", res)
	}
	// Unknown login requests.
	resp, err = b.c.Get(e.url + "/oauth/login?request=berth_lr_nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("unknown login request: %d", resp.StatusCode)
	}
}
