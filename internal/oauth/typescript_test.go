package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/interop"
)

// TestTypeScriptSDKClient: the official TypeScript SDK's OAuth client
// connects knowing only the /mcp URL (click-to-connect).
func TestTypeScriptSDKClient(t *testing.T) {
	e := newEnv(t, nil)
	var sum struct {
		ClientID          string `json:"client_id"`
		Tools             int    `json:"tools"`
		ToolsAfterRefresh int    `json:"tools_after_refresh"`
		Refreshes         int    `json:"refreshes"`
		Rotated           bool   `json:"rotated"`
		Scope             string `json:"scope"`
	}
	runTypeScript(t, e, "testdata/ts-oauth-client.mjs", &sum)
	if !strings.HasPrefix(sum.ClientID, "berth_client_") || sum.Tools == 0 || sum.ToolsAfterRefresh != sum.Tools ||
		sum.Refreshes != 1 || !sum.Rotated {
		t.Fatalf("summary: %+v", sum)
	}
	if n := e.count(t, "oauth_clients"); n != 1 {
		t.Fatalf("%d clients registered, want 1", n)
	}
}

// TestTypeScriptSDKStepUp: a TypeScript SDK client holding berth:read
// berth:exec steps up for register_client and can still run bash: the
// 403 challenge names the scopes the call needs with those the token has.
func TestTypeScriptSDKStepUp(t *testing.T) {
	e := newEnv(t, nil)
	var sum struct {
		FirstScope     string   `json:"first_scope"`
		SteppedScope   string   `json:"stepped_scope"`
		Requested      []string `json:"requested"`
		Authorizations int      `json:"authorizations"`
		BashStdout     string   `json:"bash_stdout"`
	}
	runTypeScript(t, e, "testdata/ts-stepup-client.mjs", &sum)
	scopes := func(s string) []string { f := strings.Fields(s); slices.Sort(f); return f }
	if got := scopes(sum.FirstScope); !slices.Equal(got, []string{"berth:exec", "berth:read"}) {
		t.Fatalf("first token's scope %q, want berth:read berth:exec: %+v", sum.FirstScope, sum)
	}
	if got := scopes(sum.SteppedScope); !slices.Equal(got, []string{"berth:exec", "berth:read", "berth:write"}) {
		t.Fatalf("stepped-up token's scope %q, want berth:read berth:write berth:exec: %+v", sum.SteppedScope, sum)
	}
	if sum.Authorizations != 2 || sum.BashStdout != "stepped up\n" {
		t.Fatalf("want two authorizations and bash working after the step-up: %+v", sum)
	}
}

// runTypeScript runs a TypeScript SDK client script against e's /mcp as
// the member ts-user and decodes the JSON summary it prints into out.
func runTypeScript(t *testing.T, e *env, script string, out any) {
	t.Helper()
	node := interop.Node(t)
	sdk := filepath.Join(interop.Dir(), "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "BERTH_MCP_URL="+e.url+"/mcp", "BERTH_USER=ts-user", "BERTH_TS_SDK="+sdk)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("TypeScript client %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		t.Fatalf("summary of %s %q: %v (stderr %s)", script, stdout.String(), err, stderr.String())
	}
}
