package mcpserver_test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
)

// authority is one berth with both surfaces, called over plain HTTP so
// that the status and WWW-Authenticate of every answer can be read.
type authority struct {
	t    *testing.T
	e    *orchtest.Env
	base string
	// tokens of the admin user by scope set, made once each.
	tokens map[string]string
}

// surfaceAnswer is what one call answered: the HTTP status and
// challenge, and the error message if the call failed (for MCP, the
// tool result's text when isError).
type surfaceAnswer struct {
	status    int
	challenge string
	failed    bool
	message   string
}

func (a surfaceAnswer) String() string {
	return fmt.Sprintf("HTTP %d (WWW-Authenticate %q) failed=%v %s", a.status, a.challenge, a.failed, a.message)
}

// token returns a token of the admin user holding exactly scopes. The
// admin may do everything, so a call it makes is refused only for its
// token's scopes, its input or the state of what it names.
func (a *authority) token(scopes []rbac.Scope) string {
	key := strings.Join(rbac.ScopeStrings(scopes), " ")
	if tok, ok := a.tokens[key]; ok {
		return tok
	}
	tok, _ := a.e.Token(a.t, "admin", rbac.ScopeStrings(scopes)...)
	a.tokens[key] = tok
	return tok
}

func (a *authority) do(req *http.Request, tok string) (*http.Response, []byte) {
	a.t.Helper()
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp, raw
}

// rest calls the operation's route with input split into path, query
// and body as the catalogue says.
func (a *authority) rest(o catalog.Op, input map[string]any, tok string) surfaceAnswer {
	a.t.Helper()
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
	}
	req, _ := http.NewRequest(o.REST.Method, a.base+path, rd)
	resp, raw := a.do(req, tok)
	ans := surfaceAnswer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate")}
	if resp.StatusCode != http.StatusOK {
		ans.failed, ans.message = true, string(raw)
	}
	return ans
}

// mcp calls the operation's tool with one tools/call POST.
func (a *authority) mcp(o catalog.Op, input map[string]any, tok string) surfaceAnswer {
	a.t.Helper()
	var args any = input
	if o.IdeGYM != "" {
		args = map[string]any{"request": input}
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": o.Tool(), "arguments": args}})
	req, _ := http.NewRequest("POST", a.base+"/mcp", bytes.NewReader(msg))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, raw := a.do(req, tok)
	ans := surfaceAnswer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate")}
	if resp.StatusCode != http.StatusOK {
		ans.failed, ans.message = true, string(raw)
		return ans
	}
	var rpc struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &rpc); err != nil {
		a.t.Fatalf("MCP %s: answer %q: %v", o.Tool(), raw, err)
	}
	switch {
	case rpc.Error != nil:
		ans.failed, ans.message = true, rpc.Error.Message
	case rpc.Result == nil:
		a.t.Fatalf("MCP %s: answer %q has neither result nor error", o.Tool(), raw)
	case rpc.Result.IsError:
		ans.failed = true
		for _, c := range rpc.Result.Content {
			ans.message += c.Text
		}
	}
	return ans
}

// lacking returns the scopes a token holds to lack need and nothing
// else: every berth scope that does not imply it.
func lacking(need rbac.Scope) []rbac.Scope {
	var out []rbac.Scope
	for _, sc := range rbac.AllScopes() {
		if !sc.Implies(need) {
			out = append(out, sc)
		}
	}
	return out
}

// challengeScopes reads the scope parameter of a Bearer challenge.
func challengeScopes(ch string) []string {
	_, rest, ok := strings.Cut(ch, `scope="`)
	if !ok {
		return nil
	}
	list, _, _ := strings.Cut(rest, `"`)
	return strings.Fields(list)
}

// tinyTar is a tar archive of one file, in base64.
func tinyTar(t *testing.T) string {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "up.txt", Mode: 0o644, Size: 3}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("up\n"))
	tw.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestCatalogueIsTheScopeAuthority holds every operation, on MCP and on
// REST, to the scopes the catalogue declares for it: a token lacking one
// of them is refused at the HTTP level with 403 and an insufficient_scope
// challenge naming every declared scope (so an OAuth client steps up once
// and gets all a call needs), and a token holding exactly them is never
// refused for its scope inside the tool or handler, where a client could
// not step up.
func TestCatalogueIsTheScopeAuthority(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	full, admin := e.Token(t, "admin")
	e.Token(t, "alice") // a user to grant roles to and to read the audit entries of
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
	base := orchtest.Serve(t, func(url string) http.Handler {
		hosts := hostguard.Options{PublicURL: url}
		mcpHandler := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
		return api.NewServer(e.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpHandler})
	})
	a := &authority{t: t, e: e, base: base, tokens: map[string]string{}}
	cat := catalog.New(e.Svc)
	op := func(name string) catalog.Op {
		o, ok := cat.Op(name)
		if !ok {
			t.Fatalf("no operation %s", name)
		}
		return o
	}
	p := &parity{t: t, base: base, tok: full, cat: cat}

	// What each surface's calls work on: a client, a running server with
	// a file, a finished command, and a token to revoke.
	type target struct{ client, server, op, token, session string }
	setup := func(session string) target {
		c := p.rest(op("register_client"), map[string]any{"name": "authority"})
		cid := c.result.(map[string]any)["id"].(string)
		st := p.rest(op("start_server"), map[string]any{"client_id": cid, "image_tag": "base", "wait_seconds": 120})
		sid, ok := st.result.(map[string]any)["server_id"].(string)
		if !ok {
			t.Fatalf("start_server answered %s", st)
		}
		p.rest(op("write_file"), map[string]any{"server_id": sid, "path": "f.txt", "content": "a\nb\n"})
		run := p.rest(op("run_bash_command"), map[string]any{"server_id": sid, "command": "true", "wait_seconds": 60})
		tk := p.rest(op("create_token"), map[string]any{"name": "authority-" + session})
		tid := tk.result.(map[string]any)["token"].(map[string]any)["id"].(string)
		return target{cid, sid, run.result.(map[string]any)["id"].(string), tid, session}
	}
	targets := map[string]target{"MCP": setup("authority-mcp"), "REST": setup("authority-rest")}

	archive := tinyTar(t)
	// Every operation with inputs that reach its rules; only names
	// one surface when the other cannot take that input. Destructive
	// calls come last, so that what the others name still exists.
	type input = map[string]any
	cases := []struct {
		op    string
		only  string // "MCP" or "REST"; empty: every surface the operation is on
		input func(target) input
		// refused is the error code a call with the declared scopes
		// gets after its rules let it through; empty: it succeeds.
		refused string
	}{
		{op: "whoami", input: func(target) input { return input{} }},
		{op: "list_images", input: func(target) input { return input{} }},
		{op: "register_client", input: func(target) input { return input{"name": "more"} }},
		{op: "list_clients", input: func(target) input { return input{} }},
		{op: "get_client", input: func(x target) input { return input{"client_id": x.client} }},
		{op: "heartbeat_client", input: func(x target) input { return input{"client_id": x.client} }},
		{op: "list_servers", input: func(x target) input { return input{"client_id": x.client} }},
		{op: "get_server", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "get_server_logs", input: func(x target) input { return input{"server_id": x.server, "tail": 5} }},
		{op: "list_server_operations", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "set_server_network", input: func(x target) input {
			return input{"server_id": x.server, "network": input{"egress": "none"}}
		}},
		{op: "bash", input: func(x target) input { return input{"server_id": x.server, "session": "main", "command": "true"} }},
		{op: "bash", only: "MCP", input: func(x target) input { return input{"session": x.session, "command": "true"} }},
		{op: "session_exec", input: func(x target) input { return input{"session": x.session, "command": "true"} }},
		{op: "run_bash_command", input: func(x target) input {
			return input{"server_id": x.server, "command": "true", "wait_seconds": 60}
		}},
		{op: "get_operation_status", input: func(x target) input { return input{"operation_id": x.op} }},
		{op: "list_operations", input: func(target) input { return input{"limit": 2} }},
		{op: "run_tests", input: func(x target) input {
			return input{"server_id": x.server, "command": "true", "junit_paths": []string{"r.xml"}, "wait_seconds": 60}
		}},
		{op: "list_files", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "read_file", input: func(x target) input { return input{"server_id": x.server, "path": "f.txt"} }},
		{op: "write_file", input: func(x target) input { return input{"server_id": x.server, "path": "g.txt", "content": "g\n"} }},
		{op: "create_file", input: func(x target) input {
			return input{"server_id": x.server, "path": "h.txt", "content": "h\n", "overwrite": true}
		}},
		{op: "edit_file", input: func(x target) input {
			return input{"server_id": x.server, "path": "f.txt", "start_line": 1, "end_line": 1, "new_content": "a"}
		}},
		{op: "patch_file", input: func(x target) input {
			return input{"server_id": x.server, "path": "g.txt", "patch": "@@ -1 +1 @@\n-g\n+g\n"}
		}},
		{op: "download_archive", input: func(x target) input { return input{"server_id": x.server, "path": "f.txt"} }},
		{op: "upload_archive", input: func(x target) input {
			return input{"server_id": x.server, "path": "up", "archive_base64": archive}
		}},
		{op: "list_server_mcp_tools", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "call_server_mcp_tool", input: func(x target) input {
			return input{"server_id": x.server, "tool_name": "read_file", "arguments": input{"path": "f.txt"}}
		}},
		{op: "forward_request", input: func(x target) input { return input{"server_id": x.server, "path": "api/capabilities"} }},
		{op: "create_token", input: func(target) input { return input{"name": "more", "expires_in": 3600} }},
		{op: "list_tokens", input: func(target) input { return input{} }},
		{op: "list_tokens", input: func(target) input { return input{"all": true} }},
		{op: "read_audit_log", input: func(target) input { return input{"limit": 1} }},
		{op: "read_audit_log", input: func(target) input { return input{"user": "alice", "limit": 1} }},
		{op: "list_users", input: func(target) input { return input{} }},
		{op: "list_role_bindings", input: func(target) input { return input{} }},
		{op: "grant_role", input: func(target) input { return input{"user": "alice", "role": "viewer", "namespace": "authority"} }},
		{op: "revoke_role", input: func(target) input { return input{"user": "alice", "role": "viewer", "namespace": "authority"} }},
		{op: "build_images_from_yaml", input: func(target) input {
			return input{"yaml_content": "images:\n  - {name: authority, base: base, commands: [true]}\n", "wait_seconds": 120}
		}},
		{op: "get_job_status", input: func(target) input { return input{"job_name": "no-such-job"} }, refused: "not_found"},
		{op: "cancel_operation", input: func(x target) input { return input{"operation_id": x.op} }, refused: "conflict"},
		{op: "finish_server", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "restart_server", input: func(x target) input { return input{"server_id": x.server, "wait_seconds": 120} }},
		{op: "start_server", input: func(x target) input {
			return input{"client_id": x.client, "image_tag": "base", "wait_seconds": 120}
		}},
		{op: "stop_server", input: func(x target) input { return input{"server_id": x.server} }},
		{op: "end_session", input: func(x target) input { return input{"session": x.session} }},
		{op: "finish_client", input: func(x target) input { return input{"client_id": x.client} }},
		{op: "stop_client", input: func(x target) input { return input{"client_id": x.client} }},
		{op: "revoke_token", input: func(x target) input { return input{"token_id": x.token} }},
	}

	covered := map[string]map[string]bool{}
	for _, c := range cases {
		o := op(c.op)
		surfaces := map[string]func(catalog.Op, input, string) surfaceAnswer{}
		if !o.NoMCP && c.only != "REST" {
			surfaces["MCP"] = a.mcp
		}
		if o.REST.Method != "" && c.only != "MCP" {
			surfaces["REST"] = a.rest
		}
		if len(surfaces) == 0 {
			t.Fatalf("case %s/%s is on no surface", c.op, c.only)
		}
		for _, surface := range []string{"MCP", "REST"} {
			call, ok := surfaces[surface]
			if !ok {
				continue
			}
			if covered[c.op] == nil {
				covered[c.op] = map[string]bool{}
			}
			covered[c.op][surface] = true
			in := c.input(targets[surface])
			raw, _ := json.Marshal(in)
			decoded, err := o.Decode(raw, nil)
			if err != nil {
				t.Fatalf("%s %s: input %s: %v", surface, c.op, raw, err)
			}
			declared := o.Scopes(admin, decoded)
			t.Run(surface+"/"+c.op+"/"+strings.Join(rbac.ScopeStrings(declared), "+"), func(t *testing.T) {
				a.t = t
				defer func() { a.t = nil }()
				// Without each declared scope: 403 before anything runs.
				for _, need := range declared {
					if len(lacking(need)) == 0 {
						continue // every scope implies berth:read: no token lacks it
					}
					tok := a.token(lacking(need))
					got := call(o, in, tok)
					if got.status != http.StatusForbidden || !strings.Contains(got.challenge, `error="insufficient_scope"`) {
						t.Errorf("token lacking %s: %s; want 403 with an insufficient_scope challenge", need, got)
						continue
					}
					for _, sc := range declared {
						if !slices.Contains(challengeScopes(got.challenge), string(sc)) {
							t.Errorf("token lacking %s: challenge %q does not name declared scope %s, so one step-up would not do", need, got.challenge, sc)
						}
					}
				}
				// With exactly the declared scopes: never refused for them.
				// Every call but those named otherwise succeeds, so
				// each went past all of its rules.
				got := call(o, in, a.token(declared))
				switch {
				case got.status == http.StatusForbidden || strings.Contains(got.challenge, "insufficient_scope") ||
					strings.Contains(got.message, "lacks scope"):
					t.Errorf("token with the declared %v was refused for its scope: %s", declared, got)
				case c.refused == "" && got.failed:
					t.Errorf("token with the declared %v: %s; want success", declared, got)
				case c.refused != "" && !strings.Contains(got.message, c.refused):
					t.Errorf("token with the declared %v: %s; want %s", declared, got, c.refused)
				}
			})
		}
	}
	// tasks/cancel is cancel_operation by another name, and asks for
	// the same scopes.
	t.Run("MCP/tasks-cancel", func(t *testing.T) {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"` + targets["MCP"].op + `"}}`
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(msg))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		a.t = t
		resp, raw := a.do(req, a.token([]rbac.Scope{rbac.ScopeRead}))
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusForbidden || !slices.Contains(challengeScopes(ch), "berth:write") || !slices.Contains(challengeScopes(ch), "berth:exec") {
			t.Errorf("tasks/cancel with a read-only token: %d %q %s; want 403 asking for berth:write and berth:exec", resp.StatusCode, ch, raw)
		}
	})
	for _, o := range cat.Ops() {
		if !o.NoMCP && !covered[o.Name]["MCP"] {
			t.Errorf("operation %s is on MCP but has no case", o.Name)
		}
		if o.REST.Method != "" && !covered[o.Name]["REST"] {
			t.Errorf("operation %s is on REST but has no case", o.Name)
		}
	}
}
