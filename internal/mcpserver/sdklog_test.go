package mcpserver_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// TestMCPCallsLogNoSDKChatter: on the stateless handler the go-sdk logs
// three Info lines per request (a server session connected and
// disconnected), which filled berth's log with three lines a command at
// a measured 3.5% of its CPU per bash call. With berth's log at Info, MCP
// calls add none of them; berth's own lines still come through.
func TestMCPCallsLogNoSDKChatter(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	oe := orchtest.New(t, agentBin, orchestrator.Config{Logger: log})
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{oe.Svc}, Realm: "berth"}
	url := orchtest.Serve(t, func(url string) http.Handler {
		return mcpserver.New(oe.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hostguard.Options{PublicURL: url}}, Logger: log}).Handler()
	})
	e := &env{Env: oe, url: url}
	tok, _ := e.Token(t, "alice")
	cs := e.connect(t, tok)
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "quiet"}}, &c)
	var op struct {
		ServerID string `json:"server_id"`
	}
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &op)
	for range 5 {
		if res := call(t, cs, "bash", map[string]any{"server_id": op.ServerID, "command": "true"}, nil); res.IsError {
			t.Fatalf("bash: %s", text(res))
		}
	}
	got := logs.String()
	if strings.Contains(got, "server session") {
		t.Errorf("the SDK's per-request lines reached berth's log:\n%s", got)
	}
	if !strings.Contains(got, "operation started") {
		t.Errorf("berth's own Info lines are missing from its log:\n%s", got)
	}
}
