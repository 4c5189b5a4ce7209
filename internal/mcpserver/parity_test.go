package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// parityCase pairs an MCP tool with the REST route over the same service
// method.
type parityCase struct {
	tool   string
	args   func(ids) any
	method string
	path   func(ids) string
	body   func(ids) any
	// unwrap names the MCP output field holding what REST returns bare
	// (lists are wrapped in an object for MCP structured output).
	unwrap string
	// idegymIDs are the id aliases the IdeGYM tools add for compatibility.
	idegymIDs bool
}

type ids struct{ client, server, op string }

// TestRESTParity calls every MCP tool and the matching REST route on the
// same server and checks both answer with the same shape, which they can
// only do by calling the same service method with the same types.
func TestRESTParity(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	tok, _ := e.Token(t, "alice")
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
	base := orchtest.Serve(t, func(url string) http.Handler {
		hosts := hostguard.Options{PublicURL: url}
		mcpHandler := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
		return api.NewServer(e.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpHandler})
	})
	srv := struct{ URL string }{base}
	cs := (&env{Env: e, url: srv.URL + "/mcp"}).connect(t, tok)

	rest := func(method, path string, body any) any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("REST %s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var v any
		json.Unmarshal(raw, &v)
		return v
	}

	// Two clients and servers: one through each surface, so destructive
	// calls each have their own target.
	setup := func() ids {
		var c struct{ ID string }
		call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "parity"}}, &c)
		var op struct {
			ServerID string `json:"server_id"`
			ID       string
		}
		call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &op)
		call(t, cs, "write_file", map[string]any{"server_id": op.ServerID, "path": "f.txt", "content": "a\nb\n"}, nil)
		return ids{client: c.ID, server: op.ServerID, op: op.ID}
	}
	m, r := setup(), setup()

	req := func(v map[string]any) map[string]any { return map[string]any{"request": v} }
	cases := []parityCase{
		{tool: "whoami", args: func(ids) any { return map[string]any{} }, method: "GET", path: func(ids) string { return "/api/whoami" }},
		{tool: "list_clients", args: func(ids) any { return map[string]any{} }, method: "GET", path: func(ids) string { return "/api/clients" }, unwrap: "clients"},
		{tool: "list_servers", args: func(i ids) any { return map[string]any{"client_id": i.client} }, method: "GET", path: func(i ids) string { return "/api/servers?client_id=" + i.client }, unwrap: "servers"},
		{tool: "get_server", args: func(i ids) any { return map[string]any{"server_id": i.server} }, method: "GET", path: func(i ids) string { return "/api/servers/" + i.server }},
		{tool: "get_server_logs", args: func(i ids) any { return map[string]any{"server_id": i.server} }, method: "GET", path: func(i ids) string { return "/api/servers/" + i.server + "/logs" }},
		{tool: "get_operation_status", args: func(i ids) any { return req(map[string]any{"operation_id": i.op}) }, method: "GET", path: func(i ids) string { return "/api/operations/" + i.op }, idegymIDs: true},
		{tool: "bash", args: func(i ids) any { return map[string]any{"server_id": i.server, "command": "echo hi"} },
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/sessions/default/exec" }, body: func(ids) any { return map[string]any{"command": "echo hi"} }},
		{tool: "run_bash_command", args: func(i ids) any {
			return req(map[string]any{"server_id": i.server, "command": "true", "wait_seconds": 60})
		},
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/bash" }, body: func(ids) any { return map[string]any{"command": "true", "wait_seconds": 60} }, idegymIDs: true},
		{tool: "list_files", args: func(i ids) any { return map[string]any{"server_id": i.server} }, method: "GET", path: func(i ids) string { return "/api/servers/" + i.server + "/files" }},
		{tool: "read_file", args: func(i ids) any { return map[string]any{"server_id": i.server, "path": "f.txt"} }, method: "GET", path: func(i ids) string { return "/api/servers/" + i.server + "/files/content?path=f.txt" }},
		{tool: "write_file", args: func(i ids) any { return map[string]any{"server_id": i.server, "path": "g.txt", "content": "x\n"} },
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/files/write" }, body: func(ids) any { return map[string]any{"path": "g.txt", "content": "x\n"} }},
		{tool: "edit_file", args: func(i ids) any {
			return map[string]any{"server_id": i.server, "path": "f.txt", "start_line": 1, "end_line": 1, "new_content": "A"}
		},
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/files/edit" }, body: func(ids) any {
				return map[string]any{"path": "f.txt", "start_line": 1, "end_line": 1, "new_content": "A"}
			}},
		{tool: "patch_file", args: func(i ids) any {
			return map[string]any{"server_id": i.server, "path": "f.txt", "patch": "@@ -2 +2 @@\n-b\n+B\n"}
		},
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/files/patch" }, body: func(ids) any { return map[string]any{"path": "f.txt", "patch": "@@ -2 +2 @@\n-b\n+B\n"} }},
		{tool: "list_server_mcp_tools", args: func(i ids) any { return req(map[string]any{"server_id": i.server}) }, method: "GET", path: func(i ids) string { return "/api/servers/" + i.server + "/mcp/tools" }},
		{tool: "call_server_mcp_tool", args: func(i ids) any {
			return req(map[string]any{"server_id": i.server, "tool_name": "read_file", "arguments": map[string]any{"path": "f.txt"}})
		},
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/mcp/call" }, body: func(ids) any {
				return map[string]any{"tool_name": "read_file", "arguments": map[string]any{"path": "f.txt"}}
			}},
		{tool: "forward_request", args: func(i ids) any { return req(map[string]any{"server_id": i.server, "path": "api/capabilities"}) },
			method: "POST", path: func(ids) string { return "/api/forward-request" }, body: func(i ids) any { return map[string]any{"server_id": i.server, "path": "api/capabilities"} }},
		{tool: "finish_server", args: func(i ids) any { return req(map[string]any{"server_id": i.server}) }, method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/finish" }},
		{tool: "restart_server", args: func(i ids) any { return req(map[string]any{"server_id": i.server, "wait_seconds": 120}) },
			method: "POST", path: func(i ids) string { return "/api/servers/" + i.server + "/restart" }, body: func(ids) any { return map[string]any{"wait_seconds": 120} }, idegymIDs: true},
		{tool: "stop_server", args: func(i ids) any { return req(map[string]any{"server_id": i.server}) }, method: "DELETE", path: func(i ids) string { return "/api/servers/" + i.server }},
		{tool: "finish_client", args: func(i ids) any { return req(map[string]any{"client_id": i.client}) }, method: "POST", path: func(i ids) string { return "/api/clients/" + i.client + "/finish" }},
		{tool: "stop_client", args: func(i ids) any { return req(map[string]any{"client_id": i.client}) }, method: "DELETE", path: func(i ids) string { return "/api/clients/" + i.client }},
		{tool: "register_client", args: func(ids) any { return req(map[string]any{"name": "p2"}) }, method: "POST", path: func(ids) string { return "/api/clients" }, body: func(ids) any { return map[string]any{"name": "p2"} }},
	}
	// A command the agent refuses (a cwd only the sandbox can know is
	// missing) is a FAILED operation carrying the agent's code, of one
	// shape on both surfaces; one berth can check itself is refused at
	// the call on both.
	refused := map[string]any{"command": "true", "cwd": "no-such-dir", "wait_seconds": 60}
	mres, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_bash_command", Arguments: req(map[string]any{"server_id": m.server, "command": "true", "cwd": "no-such-dir", "wait_seconds": 60})})
	if err != nil || mres.IsError {
		t.Fatalf("MCP refused run_bash_command: %v %s", err, text(mres))
	}
	rres := rest("POST", "/api/servers/"+r.server+"/bash", refused)
	for surface, v := range map[string]any{"MCP": mres.StructuredContent, "REST": rres} {
		op, _ := v.(map[string]any)
		if op["status"] != orchestrator.OpFailed || op["error_code"] != "bad_request" || !strings.Contains(fmt.Sprint(op["error"]), "no-such-dir") {
			t.Errorf("%s: a command the agent refused answered %v, want FAILED with bad_request naming the cwd", surface, v)
		}
	}
	if got, want := shape(mres.StructuredContent, "", true), shape(rres, "", false); got != want {
		t.Errorf("refused run_bash_command: MCP %s, REST %s", got, want)
	}
	mres, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_bash_command", Arguments: req(map[string]any{"server_id": m.server, "command": "true", "command_timeout": -5})})
	if err != nil || !mres.IsError || !strings.Contains(text(mres), "bad_request") || !strings.Contains(text(mres), "command_timeout") {
		t.Errorf("MCP run_bash_command with command_timeout -5: %v %s, want a bad_request naming the field", err, text(mres))
	}
	hreq, _ := http.NewRequest("POST", srv.URL+"/api/servers/"+r.server+"/bash", strings.NewReader(`{"command":"true","command_timeout":-5}`))
	hreq.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(hreq); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("REST bash with command_timeout -5: %v %v, want 400", resp, err)
	} else {
		resp.Body.Close()
	}

	covered := map[string]bool{"start_server": true} // exercised by setup on both surfaces below
	for _, c := range cases {
		covered[c.tool] = true
		t.Run(c.tool, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args(m)})
			if err != nil || res.IsError {
				t.Fatalf("MCP %s: %v %s", c.tool, err, text(res))
			}
			var body any
			if c.body != nil {
				body = c.body(r)
			}
			got := shape(res.StructuredContent, c.unwrap, c.idegymIDs)
			want := shape(rest(c.method, c.path(r), body), "", false)
			if got != want {
				t.Fatalf("MCP %s answers %s; REST %s %s answers %s", c.tool, got, c.method, c.path(r), want)
			}
		})
	}
	// start_server: the same operation shape on both surfaces.
	var c2 struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "start"}}, &c2)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "start_server", Arguments: req(map[string]any{"client_id": c2.ID, "image_tag": "base"})})
	if err != nil || res.IsError {
		t.Fatal(err, text(res))
	}
	if got, want := shape(res.StructuredContent, "", true), shape(rest("POST", "/api/servers", map[string]any{"client_id": c2.ID, "image_tag": "base"}), "", false); got != want {
		t.Fatalf("start_server: MCP %s, REST %s", got, want)
	}
	// Image builds: one through each surface, then each job read through
	// each; the jobs succeeded alike, so their answers have one shape.
	build := func(name string) map[string]any {
		return map[string]any{"yaml_content": "images:\n  - {name: " + name + ", base: base, commands: [echo ok > ok]}\n", "wait_seconds": 120}
	}
	jobOf := func(surface string, v any) string {
		t.Helper()
		res, _ := v.(map[string]any)
		jobs, _ := res["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("%s build_images_from_yaml answered %v", surface, v)
		}
		job, _ := jobs[0].(map[string]any)
		if job["status"] != orchestrator.JobSuccess {
			t.Fatalf("%s build job %v, want success", surface, job)
		}
		return fmt.Sprint(job["job_name"])
	}
	mres, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "build_images_from_yaml", Arguments: req(build("parity-mcp"))})
	if err != nil || mres.IsError {
		t.Fatalf("MCP build_images_from_yaml: %v %s", err, text(mres))
	}
	rres = rest("POST", "/api/images/build", build("parity-rest"))
	if got, want := shape(mres.StructuredContent, "", false), shape(rres, "", false); got != want {
		t.Errorf("build_images_from_yaml: MCP %s, REST %s", got, want)
	}
	if got, want := shape(mres.StructuredContent.(map[string]any)["jobs"], "", false), shape(rres.(map[string]any)["jobs"], "", false); got != want {
		t.Errorf("build_images_from_yaml jobs: MCP %s, REST %s", got, want)
	}
	mjob, rjob := jobOf("MCP", mres.StructuredContent), jobOf("REST", rres)
	covered["build_images_from_yaml"] = true
	mres, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_job_status", Arguments: req(map[string]any{"job_name": mjob})})
	if err != nil || mres.IsError {
		t.Fatalf("MCP get_job_status: %v %s", err, text(mres))
	}
	if got, want := shape(mres.StructuredContent, "", false), shape(rest("GET", "/api/jobs/"+rjob+"?wait_seconds=1", nil), "", false); got != want {
		t.Errorf("get_job_status: MCP %s, REST %s", got, want)
	}
	covered["get_job_status"] = true
	for _, name := range allTools {
		if !covered[name] {
			t.Errorf("tool %s has no REST parity case", name)
		}
	}
}

// shape describes a JSON value by its keys (recursively for the first
// element of arrays), which is what two adapters over one method share.
func shape(v any, unwrap string, idegymIDs bool) string {
	if obj, ok := v.(map[string]any); ok && unwrap != "" {
		v = obj[unwrap]
	}
	if obj, ok := v.(map[string]any); ok && idegymIDs {
		delete(obj, "operation_id")
		delete(obj, "async_operation_id")
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ",") + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "[" + shape(x[0], "", false) + "]"
	default:
		return "scalar"
	}
}
