package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/browsertest"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
)

// pageServer serves an empty page: a browser origin other than berth's.
func pageServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>page</title>"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fetchMCP is run in a page: it lists tools with the token (or none) and
// answers what the page could read, or the browser's error.
const fetchMCP = `(async (url, token) => {
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"};
  if (token) headers.Authorization = "Bearer " + token;
  try {
    const r = await fetch(url, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list", params: {}})});
    const body = await r.json();
    return {status: r.status, challenge: r.headers.get("WWW-Authenticate") ?? "", tools: (body.result?.tools ?? []).map((t) => t.name)};
  } catch (e) {
    return {error: String(e)};
  }
})`

// fetchMCP2026 is run in a page: it calls whoami the way a 2026-07-28
// client does, with the method and the tool's name mirrored into
// Mcp-Method and Mcp-Name and a Mcp-Param-* header of an argument, and
// answers what the page could read, or the browser's error.
const fetchMCP2026 = `(async (url, token) => {
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
    "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "whoami", "Mcp-Param-Region": "eu",
    "Authorization": "Bearer " + token};
  const body = {jsonrpc: "2.0", id: 1, method: "tools/call", params: {name: "whoami", arguments: {},
    _meta: {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {name: "page", version: "1"},
      "io.modelcontextprotocol/clientCapabilities": {}}}};
  try {
    const r = await fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
    const answer = await r.json();
    return {status: r.status, challenge: r.headers.get("WWW-Authenticate") ?? "", tools: [answer.result?.structuredContent?.username ?? JSON.stringify(answer)]};
  } catch (e) {
    return {error: String(e)};
  }
})`

type pageFetch struct {
	Status    int
	Challenge string
	Tools     []string
	Error     string
}

// TestBrowserPagesOnAllowedOrigins: in real headless Chromium, a page on an
// --allowed-origins origin lists tools with a bearer token and reads the
// challenge of a 401; a page on another origin cannot read anything.
func TestBrowserPagesOnAllowedOrigins(t *testing.T) {
	allowed, other := pageServer(t), pageServer(t)
	e := newEnv(t, mcpserver.GuardOptions{Hosts: hostguard.Options{AllowedOrigins: []string{allowed}}})
	tok, _ := e.Token(t, "alice")
	b := browsertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fetchFrom := func(origin, token string) pageFetch {
		t.Helper()
		page, err := b.Open(ctx, origin+"/")
		if err != nil {
			t.Fatal(err)
		}
		var got pageFetch
		if err := page.Eval(ctx, fetchMCP+`("`+e.url+`", "`+token+`")`, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	got := fetchFrom(allowed, tok)
	if got.Error != "" || got.Status != 200 || !slices.Contains(got.Tools, "bash") {
		t.Errorf("allowed origin with a token: %+v, want tools/list", got)
	}
	// A 2026-07-28 client's headers pass the browser's preflight.
	page, err := b.Open(ctx, allowed+"/")
	if err != nil {
		t.Fatal(err)
	}
	got = pageFetch{}
	if err := page.Eval(ctx, fetchMCP2026+`("`+e.url+`", "`+tok+`")`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" || got.Status != 200 || !slices.Contains(got.Tools, "alice") {
		t.Errorf("allowed origin, 2026-07-28 headers: %+v, want whoami's answer", got)
	}
	got = fetchFrom(allowed, "")
	if got.Error != "" || got.Status != 401 || !strings.Contains(got.Challenge, "resource_metadata=") {
		t.Errorf("allowed origin without a token: %+v, want a 401 whose challenge the page reads", got)
	}
	got = fetchFrom(other, tok)
	if got.Error == "" || got.Status != 0 || len(got.Tools) != 0 {
		t.Errorf("other origin: %+v, want the fetch to fail", got)
	}
}

// TestCORSHeaders checks the answers a browser bases its decisions on.
func TestCORSHeaders(t *testing.T) {
	const allowed = "https://app.example"
	e := newEnv(t, mcpserver.GuardOptions{Hosts: hostguard.Options{AllowedOrigins: []string{allowed}}})
	do := func(method, origin string, header map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, e.url, strings.NewReader(listTools))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region"}

	resp := do("OPTIONS", allowed, preflight)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != allowed {
		t.Fatalf("preflight from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	allowHeaders := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-region", "last-event-id", "accept", "x-session-id"} {
		if !strings.Contains(allowHeaders, h) {
			t.Errorf("preflight allows headers %q, without %s", allowHeaders, h)
		}
	}
	if m := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") || !strings.Contains(m, "DELETE") || !strings.Contains(m, "GET") {
		t.Errorf("preflight allows methods %q", m)
	}
	if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("credentials allowed: no cookie authenticates /mcp")
	}

	resp = do("OPTIONS", "https://evil.example", preflight)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	// Documents berth forwards from a sandbox run in an opaque origin
	// (CSP sandbox), which browsers send as "null": never allowed.
	resp = do("OPTIONS", "null", preflight)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from the opaque origin null: %d %v", resp.StatusCode, resp.Header)
	}
	// Not a preflight: authentication applies as before.
	if resp = do("OPTIONS", "", nil); resp.StatusCode != 401 {
		t.Errorf("OPTIONS without Origin: %d", resp.StatusCode)
	}

	resp = do("POST", allowed, nil) // no token: 401
	expose := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != allowed ||
		!strings.Contains(expose, "www-authenticate") || !strings.Contains(expose, "mcp-session-id") || !strings.Contains(expose, "mcp-protocol-version") ||
		!strings.Contains(expose, "retry-after") {
		t.Errorf("401 to an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if !slices.Contains(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("Vary %v lacks Origin", resp.Header.Values("Vary"))
	}
	resp = do("POST", "https://evil.example", nil)
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin got Access-Control-Allow-Origin: %v", resp.Header)
	}
}
