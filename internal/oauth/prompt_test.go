package oauth_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// run authorizes with params and returns the pages the browser saw on the
// way and the result.
func (b *browser) run(params url.Values) ([]string, result) {
	b.t.Helper()
	from := len(b.seen)
	res := b.authorize(params)
	return slices.Clone(b.seen[from:]), res
}

// wantRedirectError checks an error sent back to the client with the
// request's state and the issuer.
func (e *env) wantRedirectError(t *testing.T, res result, params url.Values, code string) {
	t.Helper()
	if res.redirect == nil {
		t.Fatalf("want %s at the client, got a page: %d %s", code, res.status, res.page)
	}
	q := res.redirect.Query()
	if q.Get("error") != code || q.Get("error_description") == "" || q.Get("code") != "" ||
		q.Get("state") != params.Get("state") || q.Get("iss") != e.as.Issuer() {
		t.Fatalf("want error %s with state %q and iss %q, got %s", code, params.Get("state"), e.as.Issuer(), res.redirect)
	}
}

func withPrompt(v url.Values, prompt string) url.Values {
	v.Set("prompt", prompt)
	return v
}

func TestPromptLogin(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Prompt")
	b := e.browser(t, "olga")
	b.code(e.authParams(reg.ClientID, newPKCE(t))) // session and remembered consent

	// Without a prompt, the session and the consent are used.
	if seen, res := b.run(e.authParams(reg.ClientID, newPKCE(t))); len(seen) != 0 || res.redirect == nil {
		t.Fatalf("plain request showed %v", seen)
	}
	// prompt=login shows the login page despite the valid session, then
	// continues as usual: consent is remembered, so a code follows.
	for range 2 {
		p := newPKCE(t)
		params := withPrompt(e.authParams(reg.ClientID, p), "login")
		seen, res := b.run(params)
		if !slices.Equal(seen, []string{"login"}) || res.redirect == nil || res.redirect.Query().Get("code") == "" {
			t.Fatalf("prompt=login: saw %v, ended %+v", seen, res)
		}
		if q := res.redirect.Query(); q.Get("state") != params.Get("state") || q.Get("iss") != e.as.Issuer() {
			t.Fatalf("prompt=login redirect %s lacks state or iss", res.redirect)
		}
		mustToken(t, e.exchange(t, reg.ClientID, res.redirect.Query().Get("code"), p))
	}
	// Each login replaced the browser's session rather than adding one.
	if n := e.count(t, "oauth_browser_sessions"); n != 1 {
		t.Fatalf("%d browser sessions, want 1", n)
	}
	// Naming the fresh-login marker does not skip the login.
	params := withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "login")
	req, _ := http.NewRequest("GET", e.url+"/oauth/authorize?"+params.Encode()+"&berth_fresh_login=forged", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/oauth/login?") {
		t.Fatalf("forged marker: %d %q, want the login page", resp.StatusCode, loc)
	}

	// Logging in as someone else switches the user; that user has not
	// approved the client, so the consent page follows.
	b.user = "peter"
	p := newPKCE(t)
	params = withPrompt(e.authParams(reg.ClientID, p), "login")
	seen, res := b.run(params)
	if !slices.Equal(seen, []string{"login", "consent"}) || res.redirect == nil {
		t.Fatalf("switch user: saw %v, ended %+v", seen, res)
	}
	tok := mustToken(t, e.exchange(t, reg.ClientID, res.redirect.Query().Get("code"), p))
	if status, who, _ := e.whoami(t, tok.AccessToken); status != 200 || who.Username != "peter" {
		t.Fatalf("whoami after switching user: %d %+v", status, who)
	}
}

func TestPromptConsent(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Prompt")
	b := e.browser(t, "quinn")
	b.code(e.authParams(reg.ClientID, newPKCE(t)))

	p := newPKCE(t)
	params := withPrompt(e.authParams(reg.ClientID, p), "consent")
	seen, res := b.run(params)
	if !slices.Equal(seen, []string{"consent"}) || res.redirect == nil || res.redirect.Query().Get("code") == "" {
		t.Fatalf("prompt=consent: saw %v, ended %+v", seen, res)
	}
	mustToken(t, e.exchange(t, reg.ClientID, res.redirect.Query().Get("code"), p))
	// Denying on a forced consent page goes back as access_denied.
	b.answer = "deny"
	params = withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "consent")
	seen, res = b.run(params)
	if !slices.Equal(seen, []string{"consent"}) {
		t.Fatalf("prompt=consent: saw %v", seen)
	}
	e.wantRedirectError(t, res, params, "access_denied")
	// Both together: login, then consent.
	b.answer = "approve"
	seen, res = b.run(withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "login consent"))
	if !slices.Equal(seen, []string{"login", "consent"}) || res.redirect == nil || res.redirect.Query().Get("code") == "" {
		t.Fatalf("prompt=login consent: saw %v, ended %+v", seen, res)
	}
}

func TestPromptNone(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Prompt")
	other := e.registerPublic(t, "Other")
	b := e.browser(t, "rosa")
	before := e.issued(t)

	// No session: login_required, no page.
	params := withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "none")
	seen, res := b.run(params)
	if len(seen) != 0 {
		t.Fatalf("prompt=none showed %v", seen)
	}
	e.wantRedirectError(t, res, params, "login_required")

	// A session but no remembered consent: consent_required.
	first := e.authParams(reg.ClientID, newPKCE(t))
	first.Set("scope", "berth:read berth:write")
	b.code(first)
	params = withPrompt(e.authParams(other.ClientID, newPKCE(t)), "none")
	seen, res = b.run(params)
	if len(seen) != 0 {
		t.Fatalf("prompt=none showed %v", seen)
	}
	e.wantRedirectError(t, res, params, "consent_required")
	// Consent covering fewer scopes than asked is no consent either.
	params = withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "none")
	params.Set("scope", "berth:read berth:exec")
	e.wantRedirectError(t, b.authorize(params), params, "consent_required")

	// Session and consent: a code without a page.
	p := newPKCE(t)
	params = withPrompt(e.authParams(reg.ClientID, p), "none")
	params.Set("scope", "berth:write")
	seen, res = b.run(params)
	if len(seen) != 0 || res.redirect == nil || res.redirect.Query().Get("code") == "" {
		t.Fatalf("prompt=none with consent: saw %v, ended %+v", seen, res)
	}
	mustToken(t, e.exchange(t, reg.ClientID, res.redirect.Query().Get("code"), p))

	// none with anything else is malformed (OpenID Connect Core 3.1.2.1).
	params = withPrompt(e.authParams(reg.ClientID, newPKCE(t)), "none login")
	seen, res = b.run(params)
	if len(seen) != 0 {
		t.Fatalf("prompt=none login showed %v", seen)
	}
	e.wantRedirectError(t, res, params, "invalid_request")
	if got := e.issued(t); got[0] != before[0]+2 {
		t.Fatalf("grants %v -> %v, want exactly the two successful authorizations", before, got)
	}
}
