package forward

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestAgentURLPathCleans(t *testing.T) {
	cases := []struct{ in, decoded, escaped string }{
		{"", "/", "/"},
		{"api/tools/bash", "/api/tools/bash", "/api/tools/bash"},
		{"api//tools/./bash", "/api/tools/bash", "/api/tools/bash"},
		{"api/fs/", "/api/fs/", "/api/fs/"},
		{"api/x%20y", "/api/x y", "/api/x%20y"},
		{"api/a.b/..c/c..", "/api/a.b/..c/c..", "/api/a.b/..c/c.."},
		{"./", "/", "/"},
	}
	for _, c := range cases {
		decoded, escaped, err := agentURLPath(c.in)
		if err != nil {
			t.Errorf("agentURLPath(%q): %v", c.in, err)
			continue
		}
		if decoded != c.decoded || escaped != c.escaped {
			t.Errorf("agentURLPath(%q) = %q, %q; want %q, %q", c.in, decoded, escaped, c.decoded, c.escaped)
		}
	}
}

func TestAgentURLPathRefusesEscapes(t *testing.T) {
	bad := []string{
		"/api/tools",
		"//etc/passwd",
		"..",
		"../etc/passwd",
		"api/../../etc",
		"api/..",
		"%2e%2e/etc",
		"%2E%2e/etc",
		"api/%2e",
		"api/.%2e/x",
		"%252e%252e/etc",
		"%25252e%25252e/etc",
		"api%2f..%2fsecret",
		"api%2fsecret",
		`api\..\secret`,
		"api%5c..%5csecret",
		"api/%00",
		"api/a%0ab",
		"api/%zz",
		"api/%",
		"%2525252525252e",
		"api?x=1",
		"api#frag",
	}
	for _, p := range bad {
		_, _, err := agentURLPath(p)
		if err == nil {
			t.Errorf("agentURLPath(%q) accepted an escaping path", p)
			continue
		}
		if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "path") {
			t.Errorf("agentURLPath(%q) error = %+v, want bad_request naming the path", p, d)
		}
	}
}

// TestForwardRefusesEscapingPathOverHTTP sends escaping paths through a real
// server and checks that the agent never sees them.
func TestForwardRefusesEscapingPathOverHTTP(t *testing.T) {
	var hits atomic.Int64
	ep := startBackend(t, "unix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)

	for _, p := range []string{"api/../../etc/passwd", "api/%2e%2e/x", "api%2F..%2Fx", "/api/x"} {
		u, err := url.Parse(front.URL + "/fwd/" + p)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		var body wire.Error
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: decode: %v", u, err)
		}
		if resp.StatusCode != http.StatusBadRequest || body.Error.Code != wire.CodeBadRequest {
			t.Errorf("GET %s: %d %+v, want 400 bad_request", u, resp.StatusCode, body.Error)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("backend was hit %d times by refused paths", n)
	}
}
