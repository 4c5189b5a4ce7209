package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// postConsent posts a consent form from the browser and returns the
// status, the page shown (when not a redirect) and where it redirected.
func (b *browser) postConsent(f url.Values) (int, string, *url.URL) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.e.url+"/oauth/authorize", f)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	loc, _ := resp.Location()
	return resp.StatusCode, string(body), loc
}

// TestConsentCSRFBoundToRequest is defect 10a: the consent form's token
// must approve only the authorization request whose page showed it. A
// token lifted from client A's consent page (the user is looking at it,
// or it leaked) must not approve client B, nor A with other parameters.
func TestConsentCSRFBoundToRequest(t *testing.T) {
	e := newEnv(t, nil)
	regA := e.registerPublic(t, "Client A")
	regB := e.registerPublic(t, "Client B")
	b := e.browser(t, "alice")
	pA, pB := newPKCE(t), newPKCE(t)
	paramsA, paramsB := e.authParams(regA.ClientID, pA), e.authParams(regB.ClientID, pB)
	formA := formFields(b.authorizeUntilConsent(paramsA))
	formB := formFields(b.authorizeUntilConsent(paramsB))
	if formA.Get("csrf") == "" || formB.Get("csrf") == "" {
		t.Fatalf("consent pages without CSRF tokens: %v %v", formA, formB)
	}
	before := e.issued(t)

	tamper := func(name, value string) url.Values {
		q, _ := url.ParseQuery(formA.Get("query"))
		q.Set(name, value)
		return url.Values{"query": {q.Encode()}, "csrf": {formA.Get("csrf")}, "decision": {"approve"}}
	}
	attacker := newPKCE(t)
	cases := map[string]url.Values{
		"A's token on B's request": {"query": {formB.Get("query")}, "csrf": {formA.Get("csrf")}, "decision": {"approve"}},
		"A's token, other PKCE":    tamper("code_challenge", attacker.challenge),
		"A's token, other state":   tamper("state", "attacker-state"),
		"A's token, wider scope":   tamper("scope", "berth:read berth:write berth:exec berth:admin"),
		"A's token, other client":  tamper("client_id", regB.ClientID),
	}
	for name, f := range cases {
		status, page, loc := b.postConsent(f)
		if status != http.StatusForbidden || !strings.Contains(page, "another authorization request") {
			t.Errorf("%s: want 403 naming another authorization request, got %d (redirect %v) %s", name, status, loc, page)
		}
	}
	// Nor may the consent token serve another form of the site.
	resp, err := b.c.PostForm(e.url+"/account/apps/revoke", url.Values{"client_id": {regA.ClientID}, "csrf": {formA.Get("csrf")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("consent token accepted by the authorized apps form: %d", resp.StatusCode)
	}
	if after := e.issued(t); after != before {
		t.Fatalf("refused consent forms issued grants or tokens: %v, then %v", before, after)
	}

	// A genuine form posted by another site's page is refused too.
	req, _ := http.NewRequest("POST", e.url+"/oauth/authorize", strings.NewReader(formA.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "posted from another site") {
		t.Errorf("cross-site post of a genuine consent form: %d %s", resp.StatusCode, body)
	}
	if after := e.issued(t); after != before {
		t.Fatalf("a cross-site consent form issued grants or tokens: %v, then %v", before, after)
	}

	// Each page's own form still works.
	for _, c := range []struct {
		form   url.Values
		params url.Values
	}{{formA, paramsA}, {formB, paramsB}} {
		f := c.form
		f.Set("decision", "approve")
		status, page, loc := b.postConsent(f)
		if status != http.StatusSeeOther || loc == nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != c.params.Get("state") {
			t.Fatalf("genuine consent form of %s: %d %v %s", c.params.Get("client_id"), status, loc, page)
		}
	}
}

// TestConsentGrantsOnlyUsableScopes is defect 10b: a member asking for
// berth:admin must not get it, and the consent page must say so; an
// admin asking for it gets it.
func TestConsentGrantsOnlyUsableScopes(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Wants Admin")
	const withheld = "<code>berth:admin</code> will not be granted: your roles do not allow it."

	// mia is a member (newEnv made root the first user, the admin).
	member := e.browser(t, "mia")
	p := newPKCE(t)
	params := e.authParams(reg.ClientID, p)
	params.Set("scope", "berth:read berth:exec berth:admin")
	tok := mustToken(t, e.exchange(t, reg.ClientID, member.code(params), p))
	if !strings.Contains(member.lastConsent, withheld) || strings.Contains(member.lastConsent, "<code>berth:admin</code>: ") {
		t.Errorf("the member's consent page does not say berth:admin is withheld, or offers it:\n%s", member.lastConsent)
	}
	if tok.Scope != "berth:read berth:exec" {
		t.Errorf("member's token scope %q, want %q", tok.Scope, "berth:read berth:exec")
	}
	if status, who, _ := e.whoami(t, tok.AccessToken); status != 200 || strings.Join(who.Scopes, " ") != "berth:read berth:exec" {
		t.Errorf("member's token: %d scopes %v", status, who.Scopes)
	}
	// A refresh cannot bring it back.
	wantOAuthError(t, e.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
		"refresh_token": {tok.RefreshToken}, "scope": {"berth:admin"}}), 400, "invalid_scope")
	// The remembered consent covers what can be granted: the next request
	// goes straight back, still without berth:admin.
	member.seen = nil
	p = newPKCE(t)
	params = e.authParams(reg.ClientID, p)
	params.Set("scope", "berth:read berth:exec berth:admin")
	if tok := mustToken(t, e.exchange(t, reg.ClientID, member.code(params), p)); tok.Scope != "berth:read berth:exec" || len(member.seen) != 0 {
		t.Errorf("second authorization: saw %v, scope %q", member.seen, tok.Scope)
	}
	// Asking for nothing but what the roles cannot use is refused.
	params = e.authParams(reg.ClientID, newPKCE(t))
	params.Set("scope", "berth:admin")
	res := member.authorize(params)
	e.wantRedirectError(t, res, params, "invalid_scope")
	if d := res.redirect.Query().Get("error_description"); !strings.Contains(d, "berth:admin") || !strings.Contains(d, "mia") {
		t.Errorf("refusal does not name the scope and the user: %q", d)
	}

	admin := e.browser(t, "root")
	p = newPKCE(t)
	params = e.authParams(reg.ClientID, p)
	params.Set("scope", "berth:read berth:admin")
	tok = mustToken(t, e.exchange(t, reg.ClientID, admin.code(params), p))
	if strings.Contains(admin.lastConsent, "will not be granted") || !strings.Contains(admin.lastConsent, "<code>berth:admin</code>: ") {
		t.Errorf("the admin's consent page does not offer berth:admin:\n%s", admin.lastConsent)
	}
	if tok.Scope != "berth:read berth:admin" {
		t.Errorf("admin's token scope %q, want %q", tok.Scope, "berth:read berth:admin")
	}
	if status, who, _ := e.whoami(t, tok.AccessToken); status != 200 || !slices.Contains(who.Scopes, "berth:admin") {
		t.Errorf("admin's token: %d scopes %v", status, who.Scopes)
	}
}
