package mcpserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// BenchmarkBashTool compares the bash tool through /mcp (auth, RBAC,
// audit, the orchestrator's relay) with the same session exec sent
// straight to the sandbox's agent, and reports each one's median.
func BenchmarkBashTool(b *testing.B) {
	e := newEnv(b, mcpserver.GuardOptions{})
	tok, _ := e.Token(b, "alice")
	cs := e.connect(b, tok)
	var c struct{ ID string }
	call(b, cs, "register_client", map[string]any{"request": map[string]any{"name": "bench"}}, &c)
	var op struct {
		ServerID string `json:"server_id"`
	}
	call(b, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &op)

	// The agent's token is derived from the server key, as the
	// orchestrator derives it; its socket is in the server's directory
	// unless that path is too long for a unix socket.
	agentTok := orchestrator.AgentToken(orchtest.ServerKey, op.ServerID)
	sock := filepath.Join(e.DataDir, "servers", op.ServerID, "agent.sock")
	if _, err := os.Stat(sock); err != nil {
		sum := sha256.Sum256([]byte(e.DataDir))
		sock = filepath.Join(os.TempDir(), "berth-"+hex.EncodeToString(sum[:6]), op.ServerID+".sock")
	}
	agent := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	direct := func() {
		req, _ := http.NewRequest("POST", "http://agent/api/sessions/default/exec", strings.NewReader(`{"command":"true"}`))
		req.Header.Set("Authorization", "Bearer "+agentTok)
		resp, err := agent.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("agent: %d", resp.StatusCode)
		}
	}
	viaMCP := func() {
		call(b, cs, "bash", map[string]any{"server_id": op.ServerID, "command": "true"}, nil)
	}
	// The go-sdk's own share: a bare stateless go-sdk server (no auth,
	// guards, scope check, audit or orchestrator) whose bash tool sends
	// the same exec to the same agent. berth-vs-sdk-relay is what berth
	// adds over the SDK, sdk-relay-vs-agent what the SDK adds.
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	type bashIn struct {
		ServerID string `json:"server_id"`
		Command  string `json:"command"`
	}
	mcp.AddTool(bare, &mcp.Tool{Name: "bash"}, func(ctx context.Context, _ *mcp.CallToolRequest, in bashIn) (*mcp.CallToolResult, any, error) {
		direct()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	bareSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer bareSrv.Close()
	bareCS, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: bareSrv.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bareCS.Close()
	viaSDK := func() {
		call(b, bareCS, "bash", map[string]any{"server_id": op.ServerID, "command": "true"}, nil)
	}
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("mcp-vs-agent/callers=%d", callers), func(b *testing.B) {
			interleaved(b, 200, callers, direct, viaMCP)
		})
		b.Run(fmt.Sprintf("sdk-relay-vs-agent/callers=%d", callers), func(b *testing.B) {
			interleaved(b, 200, callers, direct, viaSDK)
		})
		b.Run(fmt.Sprintf("berth-vs-sdk-relay/callers=%d", callers), func(b *testing.B) {
			interleaved(b, 200, callers, viaSDK, viaMCP)
		})
	}
}

// BenchmarkToolsList compares tools/list on berth's /mcp (authentication
// with a session token, transport guards, scope pre-check) with a bare
// go-sdk server listing the same tools without any of that, under the
// same parallel load.
func BenchmarkToolsList(b *testing.B) {
	e := newEnv(b, mcpserver.GuardOptions{})
	tok, _ := e.Token(b, "alice")
	tools, err := e.connect(b, tok).ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	for _, tool := range tools.Tools {
		// Pre-encoded schemas: the bare server spends nothing on them.
		for _, sch := range []*any{&tool.InputSchema, &tool.OutputSchema} {
			if *sch != nil {
				raw, err := json.Marshal(*sch)
				if err != nil {
					b.Fatal(err)
				}
				*sch = json.RawMessage(raw)
			}
		}
		bare.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	bareSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer bareSrv.Close()

	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	list := func(client *http.Client, url, token string) {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("tools/list: %d", resp.StatusCode)
		}
	}
	bareClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	berthClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	interleaved(b, 400, 8,
		func() { list(bareClient, bareSrv.URL, "") },
		func() { list(berthClient, e.url, tok) })
}
