package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// TestCapabilitiesAdvertisedAreAnswered: in each protocol version berth
// speaks, a method is answered exactly when the capability it belongs to
// is advertised (initialize, or server/discover from 2026-07-28), so a
// client that reads the capabilities learns what it may call, and one
// that calls something unadvertised is told -32601.
func TestCapabilitiesAdvertisedAreAnswered(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	// Each method with the capability (a path in the capabilities
	// object) it belongs to, and params that are valid for it.
	methods := []struct{ method, capability, params string }{
		{"tools/list", "tools", `{}`},
		{"prompts/list", "prompts", `{}`},
		{"logging/setLevel", "logging", `{"level":"info"}`},
		{"resources/list", "resources", `{}`},
		{"resources/templates/list", "resources", `{}`},
		{"resources/read", "resources", `{"uri":"berth://nothing"}`},
		{"resources/subscribe", "resources.subscribe", `{"uri":"berth://nothing"}`},
		{"completion/complete", "completions", `{"ref":{"type":"ref/prompt","name":"berth_debug_server"},"argument":{"name":"server_id","value":"a"}}`},
		{"tasks/list", "tasks.list", `{}`},
	}
	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			// withMeta adds what a 2026-07-28 request carries in _meta.
			withMeta := func(params string) string {
				if version < "2026-07-28" {
					return params
				}
				meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
				if params == `{}` {
					return "{" + meta + "}"
				}
				return params[:len(params)-1] + "," + meta + "}"
			}
			call := func(method, params string) (result map[string]any, code int) {
				t.Helper()
				headers := map[string]string{"MCP-Protocol-Version": version}
				if version >= "2026-07-28" {
					headers["Mcp-Method"] = method
					var p struct {
						Name string `json:"name"`
						URI  string `json:"uri"`
					}
					json.Unmarshal([]byte(params), &p)
					if p.Name+p.URI != "" {
						headers["Mcp-Name"] = p.Name + p.URI
					}
				}
				status, body := rawCallHeaders(t, e, tok, headers, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+withMeta(params)+`}`)
				var rpc struct {
					Result map[string]any `json:"result"`
					Error  *struct {
						Code int `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &rpc); err != nil {
					t.Fatalf("%s: %d %s: %v", method, status, body, err)
				}
				if rpc.Error != nil {
					return nil, rpc.Error.Code
				}
				return rpc.Result, 0
			}
			var caps map[string]any
			if version < "2026-07-28" {
				res, code := call("initialize", `{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
				if code != 0 {
					t.Fatalf("initialize: error %d", code)
				}
				caps, _ = res["capabilities"].(map[string]any)
			} else {
				res, code := call("server/discover", `{}`)
				if code != 0 {
					t.Fatalf("server/discover: error %d", code)
				}
				caps, _ = res["capabilities"].(map[string]any)
			}
			if caps == nil {
				t.Fatal("no capabilities advertised")
			}
			for _, m := range methods {
				if m.method == "tasks/list" && version >= "2026-07-28" {
					// 2026-07-28 has tasks as an extension, without
					// tasks/list; a request that does not opt into it is
					// served 2025-11-25's tasks (tasksv2.go).
					continue
				}
				advertised := has(caps, m.capability)
				_, code := call(m.method, m.params)
				if answered := code != -32601; answered != advertised {
					t.Errorf("%s: advertised %v (capabilities %v), answered %v (error %d)", m.method, advertised, caps, answered, code)
				}
			}
		})
	}
}

// has tells whether the dotted path names a present, non-false value.
func has(caps map[string]any, path string) bool {
	var v any = caps
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok || v == nil || v == false {
			return false
		}
	}
	return true
}
