package mcpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// FuzzJSONRPC feeds arbitrary bodies to /mcp as an authenticated caller:
// whatever arrives, the endpoint answers with a well-formed HTTP status
// and never panics or answers 500.
func FuzzJSONRPC(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_server","arguments":{"server_id":5}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"register_client","arguments":{"request":{"name":"x","nodes_count":-1}}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"prompts/get","params":{"name":"berth_debug_server","arguments":{"server_id":"\u0000"}}}`,
		`{`, `[]`, `null`, `"x"`, ``,
	} {
		f.Add(seed)
	}
	f.Add(listBatch(21, 0)) // one message past the batch limit
	e := orchtest.New(f, agentBin, orchestrator.Config{})
	tok, _ := e.Token(f, "fuzzer")
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
	h := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hostguard.Options{PublicURL: "http://berth.test"}}}).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "http://berth.test/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("body %q: status %d: %s", body, rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusOK && rec.Body.Len() > 0 && !strings.Contains(rec.Body.String(), "jsonrpc") {
			t.Fatalf("body %q: 200 without a JSON-RPC answer: %s", body, rec.Body.String())
		}
	})
}
