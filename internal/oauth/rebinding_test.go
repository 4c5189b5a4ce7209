package oauth_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// rebindHost is the name a DNS rebinding page uses: it resolves to
// 127.0.0.1, so the browser reaches berth with this Host.
const rebindHost = "evil.com"

// stateTables are every table a request could write to.
var stateTables = []string{
	"users", "session_tokens", "role_bindings", "clients", "servers", "operations", "audit_log",
	"oauth_clients", "oauth_browser_sessions", "oauth_login_requests", "oauth_consents",
	"oauth_grants", "oauth_codes", "oauth_tokens",
}

// snapshot counts the rows of every state table.
func (e *env) snapshot(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range stateTables {
		out[table] = e.count(t, table)
	}
	return out
}

// TestRebindingHostIsRefusedOnEveryRoute walks the takeover a rebinding
// page would attempt on a loopback berth (register a client, log in with
// the development login, consent, redeem the code, then use the token on
// /mcp and /api), plus the metadata, account, root and unknown routes.
// Each step is sent twice: first with Host evil.com, which must be a 403
// naming the Host and the flags and change no row in the database, then
// with the Host berth answers to, which must work, so the next step has
// what it needs.
func TestRebindingHostIsRefusedOnEveryRoute(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	session, alice := e.orch.Token(t, "alice")
	sandboxClient, err := e.orch.Svc.RegisterClient(ctx, alice, orchestrator.RegisterClientRequest{Name: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	op, err := e.orch.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: sandboxClient.ID, ImageTag: "plain", WaitSeconds: 90})
	if err != nil || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("start a sandbox: %+v %v", op, err)
	}
	serverID := op.ServerID

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: e.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	p := newPKCE(t)
	// What the steps learn from each other's answers.
	var clientID, loginPath, code, accessToken string
	var loginForm, consentForm url.Values

	type step struct {
		name string
		req  func() *http.Request
		want int // status with the allowed Host
		// took reads what later steps need from the allowed answer.
		took func(resp *http.Response, body string)
	}
	form := func(path string, v url.Values) *http.Request {
		req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}
	jsonReq := func(path, token, body string) *http.Request {
		req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req
	}
	get := func(path string) *http.Request {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		return req
	}
	steps := []step{
		{"/.well-known server metadata", func() *http.Request { return get("/.well-known/oauth-authorization-server") }, 200, nil},
		{"/.well-known resource metadata", func() *http.Request { return get("/.well-known/oauth-protected-resource/mcp") }, 200, nil},
		{"/oauth/register", func() *http.Request {
			return jsonReq("/oauth/register", "", fmt.Sprintf(`{"client_name":"evil","redirect_uris":[%q],"token_endpoint_auth_method":"none"}`, testRedirect))
		}, 201, func(_ *http.Response, body string) {
			clientID = between(body, `"client_id":"`, `"`)
		}},
		{"/oauth/authorize", func() *http.Request {
			params := e.authParams(clientID, p)
			params.Set("scope", "berth:read berth:write berth:exec")
			return get("/oauth/authorize?" + params.Encode())
		}, 302, func(resp *http.Response, _ string) {
			loginPath = resp.Header.Get("Location")
		}},
		{"/oauth/login page", func() *http.Request { return get(loginPath) }, 200, func(_ *http.Response, body string) {
			loginForm = formFields(body)
			loginForm.Set("username", "alice")
		}},
		{"/oauth/login (development login)", func() *http.Request { return form("/oauth/login", loginForm) }, 303, nil},
		{"/oauth/authorize consent page", func() *http.Request {
			return get("/oauth/authorize?" + e.authParams(clientID, p).Encode())
		}, 200, func(_ *http.Response, body string) {
			consentForm = formFields(body)
			consentForm.Set("decision", "approve")
		}},
		{"/oauth/authorize consent", func() *http.Request { return form("/oauth/authorize", consentForm) }, 303, func(resp *http.Response, _ string) {
			loc, _ := resp.Location()
			code = loc.Query().Get("code")
		}},
		{"/oauth/token", func() *http.Request {
			return form("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
				"redirect_uri": {testRedirect}, "code_verifier": {p.verifier}, "resource": {e.url + "/mcp"}})
		}, 200, func(_ *http.Response, body string) {
			accessToken = between(body, `"access_token":"`, `"`)
		}},
		{"/account/apps", func() *http.Request { return get("/account/apps") }, 200, nil},
		{"/mcp", func() *http.Request {
			return jsonReq("/mcp", accessToken, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"register_client","arguments":{"request":{"name":"from-mcp"}}}}`)
		}, 200, nil},
		{"/api clients", func() *http.Request { return jsonReq("/api/clients", session, `{"name":"from-api"}`) }, 200, nil},
		{"/api bash", func() *http.Request {
			return jsonReq("/api/servers/"+serverID+"/bash", accessToken, `{"command":"echo ran","wait_seconds":90}`)
		}, 200, nil},
		{"root", func() *http.Request { return get("/") }, 404, nil},
		{"unknown path", func() *http.Request { return get("/no/such/route") }, 404, nil},
		{"wrong method", func() *http.Request { req := get("/api/whoami"); req.Method = "DELETE"; return req }, 405, nil},
	}
	for _, s := range steps {
		before := e.snapshot(t)
		req := s.req()
		req.Host = rebindHost
		status, body := sendVia(t, browser, req)
		if status != http.StatusForbidden || !strings.Contains(body, `Host \"evil.com\"`) ||
			!strings.Contains(body, "--public-url") || !strings.Contains(body, "--allowed-hosts") {
			t.Fatalf("%s with Host %s: %d %s; want 403 naming the Host, --public-url and --allowed-hosts", s.name, rebindHost, status, body)
		}
		if after := e.snapshot(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s with Host %s changed the database:\nbefore %v\nafter  %v", s.name, rebindHost, before, after)
		}

		resp, body := sendResp(t, browser, s.req())
		if resp.StatusCode != s.want {
			t.Fatalf("%s with its own Host: %d %s, want %d", s.name, resp.StatusCode, body, s.want)
		}
		if s.took != nil {
			s.took(resp, body)
		}
	}
	if accessToken == "" {
		t.Fatal("the flow with the allowed Host issued no token")
	}

	// Every loopback name on berth's port is allowed too.
	port := e.url[strings.LastIndex(e.url, ":"):]
	for _, host := range []string{"localhost" + port, "[::1]" + port, "LOCALHOST" + port} {
		req := get("/.well-known/oauth-authorization-server")
		req.Host = host
		if status, body := sendVia(t, browser, req); status != 200 {
			t.Errorf("Host %s: %d %s", host, status, body)
		}
	}
	// Health probes answer any Host: Kubernetes sends the pod's IP.
	for _, path := range []string{"/healthz", "/readyz"} {
		req := get(path)
		req.Host = "10.1.2.3:8080"
		if status, body := sendVia(t, browser, req); status != 200 {
			t.Errorf("%s with a pod IP as Host: %d %s", path, status, body)
		}
	}
}

func sendVia(t testing.TB, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, body := sendResp(t, c, req)
	return resp.StatusCode, body
}

func sendResp(t testing.TB, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// between returns the text of s after the first before and up to the
// next after.
func between(s, before, after string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, after)
	return v
}
