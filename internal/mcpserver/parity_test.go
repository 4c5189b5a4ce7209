package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/schema"
)

// parity is one berth with both surfaces and a way to call any
// operation of the catalogue through either with one input object: the
// REST call is made from the catalogue's route (path parameters, query,
// body), the MCP call from its tool (IdeGYM's inside `request`).
type parity struct {
	t    *testing.T
	base string
	tok  string
	cs   *mcp.ClientSession
	cat  *catalog.Catalog
}

// answer is what a surface said: the result in berth's form, or the
// error's code and message.
type answer struct {
	result       any
	code, errMsg string
}

func (a answer) String() string {
	if a.code != "" {
		return fmt.Sprintf("error %s: %s", a.code, a.errMsg)
	}
	b, _ := json.Marshal(a.result)
	return string(b)
}

func (p *parity) op(name string) catalog.Op {
	o, ok := p.cat.Op(name)
	if !ok {
		p.t.Fatalf("no operation %s", name)
	}
	return o
}

func (p *parity) rest(o catalog.Op, input map[string]any) answer {
	t := p.t
	t.Helper()
	body := map[string]any{}
	for k, v := range input {
		body[k] = v
	}
	path := o.REST.Path
	for _, name := range o.REST.PathParams() {
		path = strings.Replace(path, "{"+name+"}", url.PathEscape(fmt.Sprint(body[name])), 1)
		delete(body, name)
	}
	q := url.Values{}
	for _, name := range o.REST.Query {
		if v, ok := body[name]; ok {
			q.Set(name, fmt.Sprint(v))
			delete(body, name)
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var rd io.Reader
	if o.REST.HasBody() {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else if len(body) > 0 {
		t.Fatalf("%s: fields %v cannot be sent over REST", o.Name, body)
	}
	req, _ := http.NewRequest(o.REST.Method, p.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+p.tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
			t.Fatalf("REST %s %s: %d %s", o.REST.Method, path, resp.StatusCode, raw)
		}
		return answer{code: e.Error.Code, errMsg: e.Error.Message}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("REST %s %s: %v", o.REST.Method, path, err)
	}
	return answer{result: v}
}

var errorText = regexp.MustCompile(`(?s)^(.*) \(([a-z_]+)\)$`)

func (p *parity) mcp(o catalog.Op, input map[string]any) answer {
	t := p.t
	t.Helper()
	var args any = input
	if o.IdeGYM != "" {
		args = map[string]any{"request": input}
	}
	res, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: o.Tool(), Arguments: args})
	if err != nil {
		t.Fatalf("MCP %s: %v", o.Tool(), err)
	}
	if res.IsError {
		m := errorText.FindStringSubmatch(text(res))
		if m == nil {
			t.Fatalf("MCP %s: error without a code: %s", o.Tool(), text(res))
		}
		return answer{code: m[2], errMsg: m[1]}
	}
	return answer{result: berthForm(t, o, res.StructuredContent)}
}

// berthForm turns an IdeGYM tool's operation back into berth's form:
// the id aliases dropped and the result string decoded (a bash
// command's is the forwarded response's body).
func berthForm(t *testing.T, o catalog.Op, v any) any {
	op, ok := v.(map[string]any)
	if !ok || o.MCPOutput() == o.Output() {
		return v
	}
	delete(op, "operation_id")
	delete(op, "async_operation_id")
	s, ok := op["result"].(string)
	if !ok {
		delete(op, "result")
		return op
	}
	var res any
	if err := json.Unmarshal([]byte(s), &res); err != nil {
		t.Fatalf("%s: result %q is not JSON: %v", o.Tool(), s, err)
	}
	if fr, ok := res.(map[string]any); ok && op["type"] == "run_bash_command" {
		json.Unmarshal([]byte(fmt.Sprint(fr["body"])), &res)
	}
	op["result"] = res
	return op
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// masked replaces what differs between two calls that did the same:
// ids of what each created, times and durations.
func masked(v any) string {
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.HasSuffix(k, "_at") || slices.Contains([]string{"now", "mod_time", "duration_ms", "logs", "pid", "job_name", "job_names", "id", "next_cursor", "at", "time", "secret", "prefix", "Date"}, k) {
					x[k] = "<" + k + ">"
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return uuidRE.ReplaceAllString(x, "<id>")
		}
		return v
	}
	b, _ := json.Marshal(walk(v))
	return string(b)
}

// TestRESTParity calls every operation offered on both surfaces with the
// same input through REST and through MCP and checks they give the same
// answer, values and not only shapes, and the same errors: for unknown
// and mistyped fields, missing required ones and each limit.
func TestRESTParity(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	tok, _ := e.Token(t, "alice")
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
	base := orchtest.Serve(t, func(url string) http.Handler {
		hosts := hostguard.Options{PublicURL: url}
		mcpHandler := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
		return api.NewServer(e.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpHandler})
	})
	p := &parity{t: t, base: base, tok: tok, cs: (&env{Env: e, url: base + "/mcp"}).connect(t, tok), cat: catalog.New(e.Svc)}

	// One client and server for each surface, so that what one call
	// changes the other finds the same.
	type target struct{ client, server, op, token string }
	setup := func(name string, call func(catalog.Op, map[string]any) answer) target {
		c := call(p.op("register_client"), map[string]any{"name": name})
		cid := c.result.(map[string]any)["id"].(string)
		op := call(p.op("start_server"), map[string]any{"client_id": cid, "image_tag": "base", "wait_seconds": 120})
		sid := op.result.(map[string]any)["server_id"].(string)
		call(p.op("write_file"), map[string]any{"server_id": sid, "path": "f.txt", "content": "a\nb\n"})
		tk := call(p.op("create_token"), map[string]any{"name": "parity-" + name})
		tid := tk.result.(map[string]any)["token"].(map[string]any)["id"].(string)
		return target{cid, sid, op.result.(map[string]any)["id"].(string), tid}
	}
	mt, rt := setup("parity", p.mcp), setup("parity", p.rest)

	build := func(target) map[string]any {
		return map[string]any{"yaml_content": "images:\n  - {name: parity, base: base, commands: [echo ok > ok]}\n", "wait_seconds": 120}
	}
	cases := []struct {
		op     string
		input  func(target) map[string]any
		limits []map[string]any // inputs over a limit, refused alike
	}{
		{op: "whoami", input: func(target) map[string]any { return map[string]any{} }},
		{op: "list_images", input: func(target) map[string]any { return map[string]any{} }},
		{op: "list_clients", input: func(target) map[string]any { return map[string]any{} }},
		{op: "get_client", input: func(x target) map[string]any { return map[string]any{"client_id": x.client} }},
		{op: "heartbeat_client", input: func(x target) map[string]any { return map[string]any{"client_id": x.client} }},
		{op: "list_servers", input: func(x target) map[string]any { return map[string]any{"client_id": x.client} }},
		{op: "get_server", input: func(x target) map[string]any { return map[string]any{"server_id": x.server} }},
		{op: "get_server_logs", input: func(x target) map[string]any { return map[string]any{"server_id": x.server, "tail": 5} },
			limits: []map[string]any{{"tail": 10001}, {"tail": -1}}},
		{op: "list_server_operations", input: func(x target) map[string]any { return map[string]any{"server_id": x.server, "limit": 1} },
			limits: []map[string]any{{"limit": 101}}},
		{op: "get_operation_status", input: func(x target) map[string]any { return map[string]any{"operation_id": x.op} },
			limits: []map[string]any{{"wait_seconds": 301}}},
		{op: "bash", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "session": "main", "command": "cd /tmp; echo hi; pwd"}
		}, limits: []map[string]any{{"timeout": 3601}, {"timeout": -1}, {"command": ""}, {"session": "Not A Session"}}},
		{op: "end_session", input: func(target) map[string]any { return map[string]any{"session": "never-started"} },
			limits: []map[string]any{{"session": "Bad_Session"}}},
		{op: "run_bash_command", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "command": "echo one; echo two >&2; exit 3", "wait_seconds": 60}
		}, limits: []map[string]any{{"wait_seconds": 301}, {"command_timeout": -5}, {"max_output_bytes": "lots"}}},
		{op: "run_tests", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "wait_seconds": 60, "junit_paths": []string{"r.xml"},
				"command": `printf '<testsuite tests="2"><testcase name="a"/><testcase name="b"><failure/></testcase></testsuite>' > r.xml`}
		}, limits: []map[string]any{{"wait_seconds": 301}, {"command_timeout": 0}}},
		{op: "read_audit_log", input: func(x target) map[string]any {
			return map[string]any{"resource_id": x.server, "limit": 3}
		}, limits: []map[string]any{{"limit": 1001}, {"since": "yesterday"}, {"before": "not-a-cursor"}}},
		{op: "list_operations", input: func(target) map[string]any { return map[string]any{"limit": 2} },
			limits: []map[string]any{{"limit": 101}, {"cursor": "not-a-cursor"}}},
		{op: "cancel_operation", input: func(x target) map[string]any { return map[string]any{"operation_id": x.op} }},
		{op: "list_files", input: func(x target) map[string]any { return map[string]any{"server_id": x.server} }},
		{op: "read_file", input: func(x target) map[string]any { return map[string]any{"server_id": x.server, "path": "f.txt"} },
			limits: []map[string]any{{"path": "../../etc/passwd"}}},
		{op: "write_file", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "path": "g.txt", "content": "x\n"}
		}},
		{op: "create_file", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "path": "h.txt", "content": "new\n"}
		}},
		{op: "edit_file", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "path": "f.txt", "start_line": 1, "end_line": 1, "new_content": "A"}
		}},
		{op: "patch_file", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "path": "f.txt", "patch": "@@ -2 +2 @@\n-b\n+B\n"}
		}},
		{op: "list_server_mcp_tools", input: func(x target) map[string]any { return map[string]any{"server_id": x.server} }},
		{op: "call_server_mcp_tool", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "tool_name": "read_file", "arguments": map[string]any{"path": "f.txt"}}
		}, limits: []map[string]any{{"tool_name": "no_such_tool"}}},
		{op: "forward_request", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "path": "api/fs/cat?path=f.txt"}
		}, limits: []map[string]any{{"method": "TRACE"}, {"method": "GET\r\nX: y"}, {"headers": map[string]any{"X-A": "a\r\nb"}}, {"headers": map[string]any{"Proxy-Authorization": "x"}}}},
		{op: "build_images_from_yaml", input: build},
		{op: "start_server", input: func(x target) map[string]any {
			return map[string]any{"client_id": x.client, "image_tag": "base", "wait_seconds": 120}
		}, limits: []map[string]any{{"reuse_strategy": "SOMETIMES"}, {"restart_policy": "always"}, {"env": map[string]any{"1BAD": "x"}}, {"image_tag": "No-Such-Image"}}},
		{op: "set_server_network", input: func(x target) map[string]any {
			return map[string]any{"server_id": x.server, "network": map[string]any{"egress": "none"}}
		}, limits: []map[string]any{{"network": map[string]any{"egress": "sometimes"}}}},
		{op: "finish_server", input: func(x target) map[string]any { return map[string]any{"server_id": x.server} }},
		{op: "restart_server", input: func(x target) map[string]any { return map[string]any{"server_id": x.server, "wait_seconds": 120} },
			limits: []map[string]any{{"wait_seconds": 301}}},
		{op: "stop_server", input: func(x target) map[string]any { return map[string]any{"server_id": x.server} }},
		{op: "finish_client", input: func(x target) map[string]any { return map[string]any{"client_id": x.client} }},
		{op: "stop_client", input: func(x target) map[string]any { return map[string]any{"client_id": x.client} }},
		{op: "register_client", input: func(target) map[string]any { return map[string]any{"name": "p2"} },
			limits: []map[string]any{{"name": strings.Repeat("n", 129)}, {"namespace": "Not_A_Label"}, {"nodes_count": -1}}},
		{op: "create_token", input: func(target) map[string]any {
			return map[string]any{"name": "ci", "scopes": []string{"berth:read"}, "expires_in": 3600}
		},
			limits: []map[string]any{{"name": ""}, {"name": strings.Repeat("n", 65)}, {"scopes": []string{"berth:root"}}, {"expires_in": -1}, {"expires_in": 400 * 24 * 3600}}},
		{op: "list_tokens", input: func(target) map[string]any { return map[string]any{"all": true} }},
		{op: "revoke_token", input: func(x target) map[string]any { return map[string]any{"token_id": x.token} },
			limits: []map[string]any{{"token_id": "7d0e0a4c-0000-4000-8000-000000000000"}}},
		{op: "get_job_status", input: func(target) map[string]any { return map[string]any{"job_name": "no-such-job"} }},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.op] = true
		o := p.op(c.op)
		t.Run(c.op, func(t *testing.T) {
			p.t = t
			defer func() { p.t = nil }()
			// Errors first, while the targets are as setup left them.
			for _, bad := range badInputs(o, c.input(rt), c.limits) {
				m, r := p.mcp(o, bad(c.input(mt))), p.rest(o, bad(c.input(rt)))
				if r.code == "" || m.code != r.code || masked(m.errMsg) != masked(r.errMsg) {
					t.Errorf("input %v: MCP %s; REST %s", bad(c.input(rt)), m, r)
				}
			}
			m, r := p.mcp(o, c.input(mt)), p.rest(o, c.input(rt))
			if got, want := masked(m.result)+m.code+masked(m.errMsg), masked(r.result)+r.code+masked(r.errMsg); got != want {
				t.Errorf("MCP answers %s\nREST answers %s", got, want)
			}
		})
	}
	for _, o := range p.cat.Ops() {
		if o.REST.Method != "" && !o.NoMCP && !covered[o.Name] {
			t.Errorf("operation %s is on REST and MCP but has no parity case", o.Name)
		}
	}
}

// badInputs derives refused inputs from a good one: an unknown field
// and a mistyped one (where the surface carries a JSON body on both),
// each required field left out, and the case's limits.
func badInputs(o catalog.Op, good map[string]any, limits []map[string]any) []func(map[string]any) map[string]any {
	var out []func(map[string]any) map[string]any
	with := func(extra map[string]any) func(map[string]any) map[string]any {
		return func(in map[string]any) map[string]any {
			for k, v := range extra {
				in[k] = v
			}
			return in
		}
	}
	inPath := func(k string) bool { return slices.Contains(o.REST.PathParams(), k) }
	if o.REST.HasBody() {
		out = append(out, with(map[string]any{"no_such_field": 1}))
		for k, v := range good {
			if _, isString := v.(string); isString && !inPath(k) && !slices.Contains(o.REST.Query, k) {
				out = append(out, with(map[string]any{k: 5}))
				break
			}
		}
	}
	for k := range good {
		if !inPath(k) && fieldRequired(o, k) {
			out = append(out, func(in map[string]any) map[string]any { delete(in, k); return in })
		}
	}
	for _, l := range limits {
		out = append(out, with(l))
	}
	return out
}

// fieldRequired tells whether the operation's input schema requires k.
func fieldRequired(o catalog.Op, k string) bool {
	s, err := schema.Of(o.Input())
	return err == nil && slices.Contains(s.Required, k)
}
