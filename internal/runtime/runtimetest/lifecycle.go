package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// Serve serves svc's REST API with /mcp mounted, wired as `berth serve`
// wires them, on a loopback port until t ends, and returns its URL.
func Serve(t testing.TB, svc *orchestrator.Service) string {
	t.Helper()
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth"}
	return orchtest.Serve(t, func(url string) http.Handler {
		hosts := hostguard.Options{PublicURL: url}
		mcpSrv := mcpserver.New(svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}})
		return api.NewServer(svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpSrv.Handler()})
	})
}

// Lifecycle takes one server through every IdeGYM lifecycle tool, half
// over REST and half over MCP, on whatever runtime svc runs: register a
// client, start a server, run commands (one-shot and in a session), edit
// and read files, forward a request, finish, restart, stop.
func Lifecycle(t *testing.T, svc *orchestrator.Service, image string) {
	url := Serve(t, svc)
	tok, _, err := svc.CreateToken(context.Background(), orchestrator.CreateTokenRequest{Username: "lifecycle", Name: "lifecycle"})
	if err != nil {
		t.Fatal(err)
	}
	rest := restClient{t: t, url: url, token: tok}
	cs := mcpSession(t, url+"/mcp", tok)

	var client struct{ ID string }
	callTool(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "lifecycle"}}, &client)
	var op struct {
		Status, Error string
		ServerID      string `json:"server_id"`
	}
	rest.do("POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":%q,"wait_seconds":120}`, client.ID, image), &op)
	if op.Status != orchestrator.OpSucceeded {
		t.Fatalf("start_server over REST: %+v", op)
	}
	sid := op.ServerID

	var bashOp struct {
		Status string
		Result struct{ Stdout string }
	}
	rest.do("POST", "/api/servers/"+sid+"/bash", `{"command":"echo one-shot; id -u","wait_seconds":120}`, &bashOp)
	if bashOp.Status != orchestrator.OpSucceeded || !strings.HasPrefix(bashOp.Result.Stdout, "one-shot\n") {
		t.Fatalf("run_bash_command over REST: %+v", bashOp)
	}
	var br struct {
		Stdout   string
		ExitCode int `json:"exit_code"`
	}
	callTool(t, cs, "bash", map[string]any{"server_id": sid, "command": "mkdir -p src && cd src && export X=42"}, nil)
	callTool(t, cs, "bash", map[string]any{"server_id": sid, "command": "pwd | xargs basename; echo $X"}, &br)
	if br.Stdout != "src\n42\n" {
		t.Fatalf("bash session over MCP: %+v", br)
	}
	callTool(t, cs, "write_file", map[string]any{"server_id": sid, "path": "src/a.txt", "content": "one\ntwo\n"}, nil)
	callTool(t, cs, "edit_file", map[string]any{"server_id": sid, "path": "src/a.txt", "start_line": 2, "end_line": 2, "new_content": "TWO"}, nil)
	var rd struct{ Content string }
	rest.do("GET", "/api/servers/"+sid+"/files/content?path=src/a.txt", "", &rd)
	if rd.Content != "one\nTWO\n" {
		t.Fatalf("read_file over REST: %q", rd.Content)
	}
	var health map[string]any
	rest.do("GET", "/api/forward/"+client.ID+"/"+sid+"/api/health", "", &health)
	if health["status"] != "ok" {
		t.Fatalf("forwarded health: %v", health)
	}
	var logs struct{ Logs string }
	rest.do("GET", "/api/servers/"+sid+"/logs?tail=20", "", &logs)
	if !strings.Contains(logs.Logs, "listening") {
		t.Fatalf("logs: %q", logs.Logs)
	}
	callTool(t, cs, "finish_server", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid}}, nil)
	var restarted struct{ Status, Result string }
	callTool(t, cs, "restart_server", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid, "wait_seconds": 120}}, &restarted)
	if restarted.Status != orchestrator.OpSucceeded {
		t.Fatalf("restart_server over MCP: %+v", restarted)
	}
	callTool(t, cs, "bash", map[string]any{"server_id": sid, "command": "ls -A"}, &br)
	if br.Stdout != "" {
		t.Fatalf("after a restart the workspace holds %q", br.Stdout)
	}
	callTool(t, cs, "stop_server", map[string]any{"request": map[string]any{"client_id": client.ID, "server_id": sid}}, nil)
	callTool(t, cs, "stop_client", map[string]any{"request": map[string]any{"client_id": client.ID}}, nil)
}

// restClient calls the REST API with a token.
type restClient struct {
	t     *testing.T
	url   string
	token string
}

func (c restClient) do(method, path, body string, out any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s %s: %d %.500s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %q: %v", method, path, raw, err)
		}
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "runtimetest", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls an MCP tool that must succeed and decodes its structured
// answer into out.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s: tool error: %s", name, b)
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
}
