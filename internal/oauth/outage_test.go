package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestDatabaseOutageAnswers503 cuts berth's database off (every session
// terminated, none accepted) and calls every surface that needs it: the
// REST API, /mcp, the token, registration and authorization endpoints.
// Each answers 503 with Retry-After and a message that names the database
// without the driver's details; once the database is back, the same calls
// work again.
func TestDatabaseOutageAnswers503(t *testing.T) {
	e := newEnv(t, nil)
	// Tokens made now but first presented during the outage, so no cached
	// principal answers for the database.
	e.orch.Token(t, "alice")
	newToken := func() string {
		tok, _, err := e.orch.Svc.CreateToken(context.Background(), orchestrator.CreateTokenRequest{Username: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	restToken, mcpToken := newToken(), newToken()
	// This one is used just before the outage: its principal may still be
	// cached, so the call reaches the service, which needs the database.
	warmToken, _ := e.orch.Token(t, "alice")
	reg := e.registerPublic(t, "outage")
	p := newPKCE(t)
	tokens := mustToken(t, e.exchange(t, reg.ClientID, e.browser(t, "alice").code(e.authParams(reg.ClientID, p)), p))

	type call struct {
		name string
		req  func() *http.Request
	}
	form := func(path string, v url.Values) *http.Request {
		req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}
	refreshToken := tokens.RefreshToken
	calls := []call{
		{"/api", func() *http.Request {
			req, _ := http.NewRequest("GET", e.url+"/api/whoami", nil)
			req.Header.Set("Authorization", "Bearer "+restToken)
			return req
		}},
		{"/api service call", func() *http.Request {
			req, _ := http.NewRequest("POST", e.url+"/api/clients", strings.NewReader(`{"name":"during"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+warmToken)
			return req
		}},
		{"/mcp", func() *http.Request {
			req, _ := http.NewRequest("POST", e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+mcpToken)
			return req
		}},
		{"/oauth/token", func() *http.Request {
			return form("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {reg.ClientID}, "refresh_token": {refreshToken}})
		}},
		{"/oauth/register", func() *http.Request {
			req, _ := http.NewRequest("POST", e.url+"/oauth/register", strings.NewReader(`{"client_name":"during","redirect_uris":["`+testRedirect+`"],"token_endpoint_auth_method":"none"}`))
			req.Header.Set("Content-Type", "application/json")
			return req
		}},
		{"/oauth/authorize", func() *http.Request {
			req, _ := http.NewRequest("GET", e.url+"/oauth/authorize?"+e.authParams(reg.ClientID, newPKCE(t)).Encode(), nil)
			return req
		}},
	}
	noRedirect := &http.Client{Transport: e.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}

	restore := storetest.CutOff(t, e.orch.Store)
	for _, c := range calls {
		resp, body := sendResp(t, noRedirect, c.req())
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s with the database down: %d (Retry-After %q) %.300s; want 503 with Retry-After",
				c.name, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			continue
		}
		if !strings.Contains(body, "database") {
			t.Errorf("%s: %s does not say the database is unavailable", c.name, body)
		}
		if strings.Contains(body, "berth_test_") || strings.Contains(body, "SQLSTATE") || strings.Contains(body, "failed to connect") {
			t.Errorf("%s: %s shows the driver's details", c.name, body)
		}
	}
	restore()

	deadline := time.Now().Add(time.Minute)
	for {
		status, _ := sendVia(t, noRedirect, mustGet(t, e.url+"/readyz"))
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d a minute after the database came back", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := map[string]int{"/api": 200, "/api service call": 200, "/mcp": 200, "/oauth/token": 200, "/oauth/register": 201, "/oauth/authorize": 302}
	for _, c := range calls {
		if resp, body := sendResp(t, noRedirect, c.req()); resp.StatusCode != want[c.name] {
			t.Errorf("%s after the database came back: %d %.300s, want %d", c.name, resp.StatusCode, body, want[c.name])
		}
	}
}

func mustGet(t testing.TB, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
