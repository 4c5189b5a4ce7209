package oauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/oauth"
)

func TestMetadataAndChallenges(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ path, resource string }{
		{"/.well-known/oauth-protected-resource", e.url},
		{"/.well-known/oauth-protected-resource/mcp", e.url + "/mcp"},
	} {
		req, _ := http.NewRequest("GET", e.url+c.path, nil)
		var m oauth.ResourceMetadata
		resp, body := e.do(t, req, &m)
		if resp.StatusCode != 200 || m.Resource != c.resource || !slices.Equal(m.AuthorizationServers, []string{e.url}) ||
			!slices.Equal(m.BearerMethodsSupported, []string{"header"}) ||
			// What a member can use: a client asking for every listed
			// scope must not fail for berth:admin.
			!slices.Equal(m.ScopesSupported, []string{"berth:read", "berth:write", "berth:exec"}) ||
			m.ResourceName == "" || m.ResourceDocumentation == "" {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: no CORS header", c.path)
		}
	}
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		var m map[string]any
		resp, body := e.do(t, req, &m)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		want := map[string]any{
			"issuer": e.url, "authorization_endpoint": e.url + "/oauth/authorize", "token_endpoint": e.url + "/oauth/token",
			"registration_endpoint": e.url + "/oauth/register", "revocation_endpoint": e.url + "/oauth/revoke",
			"authorization_response_iss_parameter_supported": true, "client_id_metadata_document_supported": true,
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s: %s = %v, want %v", path, k, m[k], v)
			}
		}
		b, _ := json.Marshal(m)
		for _, frag := range []string{`"code_challenge_methods_supported":["S256"]`, `"response_types_supported":["code"]`,
			`"grant_types_supported":["authorization_code","refresh_token"]`,
			`"token_endpoint_auth_methods_supported":["none","client_secret_basic","client_secret_post"]`,
			`"scopes_supported":["berth:read","berth:write","berth:exec"]`} {
			if !strings.Contains(string(b), frag) {
				t.Errorf("%s lacks %s: %s", path, frag, b)
			}
		}
	}

	// 401 challenges point at the metadata of the endpoint called.
	for _, c := range []struct{ method, path, meta string }{
		{"POST", "/mcp", e.url + "/.well-known/oauth-protected-resource/mcp"},
		{"GET", "/api/whoami", e.url + "/.well-known/oauth-protected-resource"},
	} {
		req, _ := http.NewRequest(c.method, e.url+c.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, _ := e.do(t, req, nil)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || !strings.Contains(ch, `resource_metadata="`+c.meta+`"`) ||
			!strings.Contains(ch, `scope="berth:read berth:write berth:exec"`) || strings.Contains(ch, "error=") {
			t.Errorf("%s %s: %d %q", c.method, c.path, resp.StatusCode, ch)
		}
	}
}

// TestFullFlow is what an MCP client does on first connect: register,
// send the user through login and consent, get tokens, use them on /api
// and /mcp, refresh, revoke.
func TestFullFlow(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Test Editor")
	if reg.ClientSecret != "" || reg.RegistrationAccessToken == "" || reg.RegistrationClientURI != e.url+"/oauth/register/"+reg.ClientID {
		t.Fatalf("registration: %+v", reg)
	}
	b := e.browser(t, "alice")
	p := newPKCE(t)
	code := b.code(e.authParams(reg.ClientID, p))
	if !slices.Equal(b.seen, []string{"login", "consent"}) {
		t.Fatalf("pages seen: %v, want login then consent", b.seen)
	}
	tok := mustToken(t, e.exchange(t, reg.ClientID, code, p))
	if !strings.HasPrefix(tok.AccessToken, oauth.AccessTokenPrefix) || !strings.HasPrefix(tok.RefreshToken, oauth.RefreshTokenPrefix) ||
		tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.Scope != "berth:read berth:write berth:exec" {
		t.Fatalf("token answer: %+v", tok)
	}

	status, who, _ := e.whoami(t, tok.AccessToken)
	if status != 200 || who.Username != "alice" || !slices.Equal(who.Scopes, []string{"berth:read", "berth:write", "berth:exec"}) || who.TokenID == "" {
		t.Fatalf("whoami: %d %+v", status, who)
	}
	tools, err := e.listTools(t, tok.AccessToken)
	if err != nil || len(tools) == 0 {
		t.Fatalf("tools/list with the access token: %v (%d tools)", err, len(tools))
	}

	// Refresh rotates both tokens; the new access token works.
	tok2 := mustToken(t, e.refresh(t, reg.ClientID, tok.RefreshToken))
	if tok2.RefreshToken == tok.RefreshToken || tok2.AccessToken == tok.AccessToken || tok2.RefreshToken == "" {
		t.Fatalf("refresh did not rotate: %+v", tok2)
	}
	if status, _, _ := e.whoami(t, tok2.AccessToken); status != 200 {
		t.Fatalf("whoami with refreshed token: %d", status)
	}
	// A refresh may narrow the scopes, never widen them.
	narrow := mustToken(t, e.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
		"refresh_token": {tok2.RefreshToken}, "scope": {"berth:read"}}))
	if narrow.Scope != "berth:read" {
		t.Fatalf("narrowed refresh: scope %q", narrow.Scope)
	}
	wantOAuthError(t, e.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID},
		"refresh_token": {narrow.RefreshToken}, "scope": {"berth:admin"}}), 400, "invalid_scope")
	tok3 := mustToken(t, e.refresh(t, reg.ClientID, narrow.RefreshToken))
	if tok3.Scope != "berth:read berth:write berth:exec" {
		t.Fatalf("the refresh token kept scope %q, want the original ones", tok3.Scope)
	}

	// Consent is remembered: a second authorization goes straight back.
	b2 := e.browser(t, "alice")
	p2 := newPKCE(t)
	b2.code(e.authParams(reg.ClientID, p2))
	if !slices.Equal(b2.seen, []string{"login"}) {
		t.Fatalf("second authorization showed %v, want only login", b2.seen)
	}
	// And within one browser session, not even the login.
	b.seen = nil
	p3 := newPKCE(t)
	tok4 := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p3)), p3))
	if len(b.seen) != 0 {
		t.Fatalf("same browser saw %v", b.seen)
	}

	// Revocation (RFC 7009): the access token stops working; revoking a
	// refresh token ends its whole grant.
	revoke := func(token string) {
		req, _ := http.NewRequest("POST", e.url+"/oauth/revoke", strings.NewReader(url.Values{"token": {token}, "client_id": {reg.ClientID}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, body := e.do(t, req, nil); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d %s", resp.StatusCode, body)
		}
	}
	revoke(tok3.AccessToken)
	if status, _, h := e.whoami(t, tok3.AccessToken); status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "revoked") {
		t.Fatalf("revoked access token: %d %q", status, h.Get("WWW-Authenticate"))
	}
	revoke(tok4.RefreshToken)
	if status, _, _ := e.whoami(t, tok4.AccessToken); status != 401 {
		t.Fatalf("access token of a revoked refresh token's grant: %d", status)
	}
	wantOAuthError(t, e.refresh(t, reg.ClientID, tok4.RefreshToken), 400, "invalid_grant")
	// Unknown tokens are answered like known ones.
	revoke("berth_at_nothing")
}

func TestConfidentialClient(t *testing.T) {
	e := newEnv(t, nil)
	var reg registration
	resp, body := e.postJSON(t, "/oauth/register", `{"client_name":"Server App","redirect_uris":["https://app.example/cb"],"grant_types":["authorization_code"]}`, &reg)
	if resp.StatusCode != 201 || reg.TokenEndpointAuthMethod != "client_secret_basic" || !strings.HasPrefix(reg.ClientSecret, "berth_cs_") {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	var stored []byte
	if err := e.orch.Store.Pool.QueryRow(t.Context(), `SELECT secret_hash FROM oauth_clients WHERE client_id = $1`, reg.ClientID).Scan(&stored); err != nil || len(stored) != 32 {
		t.Fatalf("secret at rest: %x %v", stored, err)
	}
	b := e.browser(t, "carol")
	p := newPKCE(t)
	params := e.authParams(reg.ClientID, p)
	params.Set("redirect_uri", "https://app.example/cb")
	code := b.code(params)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"https://app.example/cb"}, "code_verifier": {p.verifier}}

	noAuth := url.Values{"client_id": {reg.ClientID}}
	for k, v := range form {
		noAuth[k] = v
	}
	wantOAuthError(t, e.token(t, noAuth), 401, "invalid_client")
	wantOAuthError(t, e.token(t, form, reg.ClientID, "berth_cs_wrong"), 401, "invalid_client")
	post := url.Values{"client_secret": {reg.ClientSecret}}
	for k, v := range noAuth {
		post[k] = v
	}
	wantOAuthError(t, e.token(t, post), 401, "invalid_client") // registered for basic, not post
	tok := mustToken(t, e.token(t, form, reg.ClientID, reg.ClientSecret))
	if tok.RefreshToken != "" {
		t.Fatal("a client without the refresh_token grant got a refresh token")
	}
	if status, who, _ := e.whoami(t, tok.AccessToken); status != 200 || who.Username != "carol" {
		t.Fatalf("whoami: %d %+v", status, who)
	}
}

func TestRegistrationManagement(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "Managed")
	call := func(method, token, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, reg.RegistrationClientURI, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return e.do(t, req, nil)
	}
	if resp, _ := call("GET", "", ""); resp.StatusCode != 401 {
		t.Fatalf("read without token: %d", resp.StatusCode)
	}
	other := e.registerPublic(t, "Other")
	if resp, _ := call("GET", other.RegistrationAccessToken, ""); resp.StatusCode != 401 {
		t.Fatalf("read with another client's token: %d", resp.StatusCode)
	}
	resp, body := call("GET", reg.RegistrationAccessToken, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"client_name":"Managed"`) || strings.Contains(string(body), "registration_access_token") {
		t.Fatalf("read: %d %s", resp.StatusCode, body)
	}
	resp, body = call("PUT", reg.RegistrationAccessToken, `{"client_id":"`+reg.ClientID+`","client_name":"Renamed","redirect_uris":["http://localhost/cb"],"token_endpoint_auth_method":"none"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"client_name":"Renamed"`) {
		t.Fatalf("update: %d %s", resp.StatusCode, body)
	}
	resp, body = call("PUT", reg.RegistrationAccessToken, `{"client_id":"`+reg.ClientID+`","redirect_uris":["http://localhost/cb"],"token_endpoint_auth_method":"client_secret_post"}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "invalid_client_metadata") {
		t.Fatalf("public to confidential: %d %s", resp.StatusCode, body)
	}
	if resp, _ := call("DELETE", reg.RegistrationAccessToken, ""); resp.StatusCode != 204 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if resp, _ := call("GET", reg.RegistrationAccessToken, ""); resp.StatusCode != 401 {
		t.Fatalf("read after delete: %d", resp.StatusCode)
	}
	res := e.browser(t, "dave").authorize(e.authParams(reg.ClientID, newPKCE(t)))
	if res.redirect != nil || res.status != 400 || !strings.Contains(res.page, "invalid_client") {
		t.Fatalf("authorize a deleted client: %+v", res)
	}
}

func TestAuthorizedApps(t *testing.T) {
	e := newEnv(t, nil)
	reg := e.registerPublic(t, "App <script>")
	b := e.browser(t, "erin")
	p := newPKCE(t)
	tok := mustToken(t, e.exchange(t, reg.ClientID, b.code(e.authParams(reg.ClientID, p)), p))

	get := func() string {
		resp, err := b.c.Get(e.url + "/account/apps")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := new(strings.Builder)
		_, _ = io.Copy(buf, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("apps page: %d %s", resp.StatusCode, buf)
		}
		return buf.String()
	}
	page := get()
	if !strings.Contains(page, "App &lt;script&gt;") || !strings.Contains(page, reg.ClientID) || strings.Contains(page, "<script>") {
		t.Fatalf("apps page does not list the client safely:\n%s", page)
	}
	post := func(f url.Values) int {
		resp, err := b.c.PostForm(e.url+"/account/apps/revoke", f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := post(url.Values{"client_id": {reg.ClientID}}); status != 403 {
		t.Fatalf("revoke without CSRF token: %d", status)
	}
	if status, _, _ := e.whoami(t, tok.AccessToken); status != 200 {
		t.Fatal("a refused revocation revoked the token")
	}
	f := formFields(page)
	f.Set("client_id", reg.ClientID)
	if status := post(f); status != 303 {
		t.Fatalf("revoke: %d", status)
	}
	if status, _, _ := e.whoami(t, tok.AccessToken); status != 401 {
		t.Fatalf("access token after the app was revoked: %d", status)
	}
	wantOAuthError(t, e.refresh(t, reg.ClientID, tok.RefreshToken), 400, "invalid_grant")
	if strings.Contains(get(), reg.ClientID) {
		t.Fatal("revoked app still listed")
	}
	// Consent is asked again.
	b.seen = nil
	b.code(e.authParams(reg.ClientID, newPKCE(t)))
	if !slices.Equal(b.seen, []string{"consent"}) {
		t.Fatalf("after revocation saw %v, want consent", b.seen)
	}
}
