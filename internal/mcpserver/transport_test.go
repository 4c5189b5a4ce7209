package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
)

// rawCall POSTs one JSON-RPC message to /mcp and returns the status and
// body. version "" sends no MCP-Protocol-Version header.
func rawCall(t testing.TB, e *env, token, version, body string) (int, string) {
	t.Helper()
	headers := map[string]string{}
	if version != "" {
		headers["MCP-Protocol-Version"] = version
	}
	return rawCallHeaders(t, e, token, headers, body)
}

// rawCallHeaders is rawCall with headers of the caller's.
func rawCallHeaders(t testing.TB, e *env, token string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const listTools = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func TestTransportProtections(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{Hosts: hostguard.Options{AllowedHosts: []string{"berth.internal:8443"}, AllowedOrigins: []string{"https://app.example"}}, MaxBodyBytes: 64 << 10})
	tok, _ := e.Token(t, "alice")
	cases := []struct {
		name   string
		mutate func(r *http.Request)
		status int
	}{
		{"ok", func(r *http.Request) {}, 200},
		{"allowed proxy host", func(r *http.Request) { r.Host = "berth.internal:8443" }, 200},
		{"another loopback name", func(r *http.Request) { r.Host = strings.Replace(r.Host, "127.0.0.1", "localhost", 1) }, 200},
		{"loopback name, other port", func(r *http.Request) { r.Host = "localhost:1" }, 403},
		{"DNS rebinding host", func(r *http.Request) { r.Host = "evil.example" }, 403},
		{"allowed origin", func(r *http.Request) { r.Header.Set("Origin", "https://app.example") }, 200},
		{"foreign origin", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"form content type", func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, 415},
		{"no content type", func(r *http.Request) { r.Header.Del("Content-Type") }, 415},
		{"json with charset", func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=utf-8") }, 200},
		{"GET", func(r *http.Request) { r.Method = "GET"; r.Body = nil; r.ContentLength = 0 }, 405},
		{"DELETE", func(r *http.Request) { r.Method = "DELETE"; r.Body = nil; r.ContentLength = 0 }, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url, strings.NewReader(listTools))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			c.mutate(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
		})
	}
	t.Run("body too large", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 100<<10) + `"}}`
		if status, body := rawCall(t, e, tok, "", big); status != 413 {
			t.Fatalf("status %d: %s", status, body)
		}
	})
}

func TestUnauthenticatedCallsGetAChallenge(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	for _, c := range []struct {
		name, token, sessionID string
		wantError              bool
	}{
		{"no token", "", "", false},
		{"no token with a session id", "", "abc", false},
		{"bad token", "berth_bad", "", true},
		{"bad token with a session id", "berth_bad", "abc", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url, strings.NewReader(listTools))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.sessionID != "" {
				req.Header.Set("Mcp-Session-Id", c.sessionID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			chal := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != 401 || !strings.Contains(chal, `resource_metadata="http://berth.test/.well-known/oauth-protected-resource/mcp"`) {
				t.Fatalf("status %d, challenge %q", resp.StatusCode, chal)
			}
			if strings.Contains(chal, `error="invalid_token"`) != c.wantError {
				t.Fatalf("challenge %q: error param present = %v, want %v", chal, !c.wantError, c.wantError)
			}
		})
	}
}

func TestMissingScopeIsAnHTTP403Challenge(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	e.Token(t, "admin")
	tok, _ := e.Token(t, "reader", "berth:read")
	// Reading works with berth:read.
	if status, body := rawCall(t, e, tok, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_clients","arguments":{}}}`); status != 200 || strings.Contains(body, `"isError":true`) {
		t.Fatalf("list_clients: %d %s", status, body)
	}
	req, _ := http.NewRequest("POST", e.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"register_client","arguments":{"request":{"name":"x"}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	chal := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 403 || !strings.Contains(chal, `error="insufficient_scope"`) || !strings.Contains(chal, `scope="berth:write berth:read"`) {
		t.Fatalf("status %d, challenge %q", resp.StatusCode, chal)
	}
}

// TestNegotiatesEveryProtocolVersion initializes with each version from
// 2024-11-05 to the newest the SDK knows and expects each to be accepted
// as asked.
func TestNegotiatesEveryProtocolVersion(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		status, out := rawCall(t, e, tok, "", body)
		if status != 200 || !strings.Contains(out, `"protocolVersion":"`+v+`"`) {
			t.Errorf("initialize %s: %d %s", v, status, out)
		}
	}
}
