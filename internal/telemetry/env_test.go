package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/telemetry"
)

var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// deadline bounds every wait, generous for a loaded 2-core machine.
const deadline = 90 * time.Second

// env is one berth wired as serve wires it (telemetry.Set into the
// store, runtime, orchestrator, auth, /mcp and the API), its log
// captured at Info.
type env struct {
	*orchtest.Env
	set telemetry.Set
	url string
	log *syncbuf.Buffer
}

func newEnv(t testing.TB, set telemetry.Set) *env {
	t.Helper()
	buf := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := store.OpenTraced(context.Background(), storetest.URL(t), set.QueryTracer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	set.WatchStore(st, log)
	dir := orchtest.DataDir(t)
	rt := orchtest.NewRuntime(t, agentBin, dir, log)
	svc, err := orchestrator.New(st, set.Runtime(rt), orchtest.Config(orchestrator.Config{
		ReadyTimeout: deadline, Observe: set.Orchestrator(), Logger: log}))
	if err != nil {
		t.Fatal(err)
	}
	orchtest.Run(t, svc)
	e := &env{Env: &orchtest.Env{Svc: svc, Store: st, Runtime: rt, DataDir: dir}, set: set, log: buf}
	e.url = orchtest.Serve(t, func(url string) http.Handler {
		authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth", Logger: log, Failed: set.AuthFailed()}
		hosts := hostguard.Options{PublicURL: url}
		mcpH := mcpserver.New(svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}, Tool: set.Tool(), Logger: log})
		return api.NewServer(svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpH.Handler(), Observe: set.HTTP(log), Logger: log})
	})
	return e
}

// do sends a request with the token (none when "") and extra headers and
// returns the answer read whole.
func (e *env) do(t testing.TB, token, method, path string, body any, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// must is do that fails the test unless the answer is 200.
func (e *env) must(t testing.TB, token, method, path string, body any, out any) {
	t.Helper()
	resp, raw := e.do(t, token, method, path, body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
}

// startServer registers a client and starts a server over REST with env,
// returning their ids.
func (e *env) startServer(t testing.TB, token string, sandboxEnv map[string]string) (clientID, serverID string) {
	t.Helper()
	var c orchestrator.Client
	e.must(t, token, "POST", "/api/clients", map[string]any{"name": "obs"}, &c)
	var op orchestrator.Operation
	e.must(t, token, "POST", "/api/servers", map[string]any{"client_id": c.ID, "image_tag": "plain",
		"env": sandboxEnv, "wait_seconds": deadline.Seconds()}, &op)
	var res orchestrator.StartServerResult
	if op.Status != orchestrator.OpSucceeded || json.Unmarshal(op.Result, &res) != nil || res.ServerID == "" {
		t.Fatalf("start_server: %+v", op)
	}
	return c.ID, res.ServerID
}

// callTool calls an MCP tool with one stateless JSON-RPC request and
// returns the answer's result.
func (e *env) callTool(t testing.TB, token, tool string, args map[string]any, header map[string]string) (*http.Response, json.RawMessage) {
	t.Helper()
	h := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
	for k, v := range header {
		h[k] = v
	}
	resp, raw := e.do(t, token, "POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}}, h)
	var rpc struct {
		Result struct {
			IsError bool            `json:"isError"`
			Content json.RawMessage `json:"content"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &rpc) != nil || rpc.Error != nil || rpc.Result.IsError {
		t.Fatalf("tools/call %s: %d %s", tool, resp.StatusCode, raw)
	}
	return resp, rpc.Result.Content
}

// contains reports whether s holds any of the secrets, naming it.
func leaked(s string, secrets ...string) string {
	for _, v := range secrets {
		if v != "" && strings.Contains(s, v) {
			return v
		}
	}
	return ""
}
