package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/interop"
)

// TestTypeScriptSDKClient: the official TypeScript SDK's OAuth client
// connects knowing only the /mcp URL (click-to-connect).
func TestTypeScriptSDKClient(t *testing.T) {
	node := interop.Node(t)
	sdk := filepath.Join(interop.Dir(), "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/ts-oauth-client.mjs")
	cmd.Env = append(os.Environ(), "BERTH_MCP_URL="+e.url+"/mcp", "BERTH_USER=ts-user", "BERTH_TS_SDK="+sdk)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("TypeScript client: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var sum struct {
		ClientID          string `json:"client_id"`
		Tools             int    `json:"tools"`
		ToolsAfterRefresh int    `json:"tools_after_refresh"`
		Refreshes         int    `json:"refreshes"`
		Rotated           bool   `json:"rotated"`
		Scope             string `json:"scope"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &sum); err != nil {
		t.Fatalf("summary %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	if !strings.HasPrefix(sum.ClientID, "berth_client_") || sum.Tools == 0 || sum.ToolsAfterRefresh != sum.Tools ||
		sum.Refreshes != 1 || !sum.Rotated {
		t.Fatalf("summary: %+v", sum)
	}
	if n := e.count(t, "oauth_clients"); n != 1 {
		t.Fatalf("%d clients registered, want 1", n)
	}
}
