package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/agent"
	"github.com/berth-mcp/berth/internal/wire"
)

const testToken = "0123456789abcdef0123456789abcdef-test"

// testAgent is a real agent serving on a loopback port.
type testAgent struct {
	url       string
	workspace string
	done      chan error
	cancel    context.CancelFunc
}

func startAgent(t testing.TB, mutate ...func(*agent.Config)) *testAgent {
	t.Helper()
	ws := t.TempDir()
	cfg := agent.Config{Workspace: ws, Token: testToken, Version: "test"}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	ln, err := agent.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{url: "http://" + ln.Addr().String(), workspace: ws, done: make(chan error, 1), cancel: cancel}
	go func() { ta.done <- a.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ta.done:
			if err != nil {
				t.Errorf("agent stopped with error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop within 30s")
		}
	})
	return ta
}

// do sends a request with the agent token and decodes a JSON answer into
// out (when non-nil). It returns the status code and the raw body.
func (ta *testAgent) do(t testing.TB, method, path string, body any, out any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, ta.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

func errorOf(t testing.TB, raw []byte) wire.ErrorDetail {
	t.Helper()
	var e wire.Error
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("want a JSON error body, got %s", raw)
	}
	return e.Error
}

func TestHealthNeedsNoToken(t *testing.T) {
	ta := startAgent(t)
	resp, err := http.Get(ta.url + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
}

func TestEveryOtherRouteNeedsTheToken(t *testing.T) {
	ta := startAgent(t)
	routes := []struct{ method, path string }{
		{"GET", "/api/capabilities"}, {"POST", "/api/shutdown"}, {"POST", "/api/tools/bash"},
		{"POST", "/api/tools/file/create"}, {"POST", "/api/tools/file/edit"}, {"POST", "/api/tools/file/patch"},
		{"POST", "/api/rewards/test"}, {"GET", "/api/sessions"}, {"POST", "/api/sessions/a/exec"},
		{"DELETE", "/api/sessions/a"}, {"GET", "/api/fs/ls"}, {"GET", "/api/fs/cat?path=x"},
		{"POST", "/api/fs/write"}, {"POST", "/api/fs/mkdir"}, {"DELETE", "/api/fs/rm?path=x"},
		{"GET", "/api/fs/archive"}, {"PUT", "/api/fs/archive?path=x"}, {"POST", "/mcp"}, {"GET", "/nope"},
	}
	for _, tok := range []string{"", "Bearer wrong-token-wrong-token-wrong-token", "Basic " + testToken} {
		for _, rt := range routes {
			req, _ := http.NewRequest(rt.method, ta.url+rt.path, strings.NewReader(`{"command":"touch pwned"}`))
			if tok != "" {
				req.Header.Set("Authorization", tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: status %d, want 401", rt.method, rt.path, tok, resp.StatusCode)
				continue
			}
			if e := errorOf(t, raw); e.Code != wire.CodeUnauthorized {
				t.Errorf("%s %s: code %q", rt.method, rt.path, e.Code)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(ta.workspace, "pwned")); err == nil {
		t.Fatal("an unauthenticated request ran a command")
	}
}

func TestNewRefusesWithoutToken(t *testing.T) {
	_, err := agent.New(agent.Config{Workspace: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("agent.New without token: %v", err)
	}
}

func TestBashOneShot(t *testing.T) {
	ta := startAgent(t)
	var res wire.BashResult
	code, raw := ta.do(t, "POST", "/api/tools/bash", map[string]any{
		"command": "echo out; echo err >&2; pwd; exit 3",
		"env":     map[string]string{"X": "1"},
	}, &res)
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n"+ta.workspace+"\n" || res.Stderr != "err\n" {
		t.Fatalf("result %+v", res)
	}
}

func TestBashTimeoutIsAResult(t *testing.T) {
	ta := startAgent(t)
	var res wire.BashResult
	code, raw := ta.do(t, "POST", "/api/tools/bash", map[string]any{
		"command": "echo started; sleep 1000", "command_timeout": 0.5, "graceful_termination_timeout": 0.2,
	}, &res)
	if code != 200 || !res.TimedOut || res.Stdout != "started\n" {
		t.Fatalf("status %d body %s", code, raw)
	}
}

func TestSessionKeepsState(t *testing.T) {
	ta := startAgent(t)
	steps := []struct{ cmd, want string }{
		{"mkdir -p sub && cd sub && export GREETING=hi && f() { echo fn-$1; }", ""},
		{"pwd", filepath.Join(ta.workspace, "sub") + "\n"},
		{"echo $GREETING; f x", "hi\nfn-x\n"},
	}
	for _, s := range steps {
		var res wire.BashResult
		code, raw := ta.do(t, "POST", "/api/sessions/work-1/exec", map[string]any{"command": s.cmd}, &res)
		if code != 200 || res.Stdout != s.want || res.ExitCode != 0 {
			t.Fatalf("%q: status %d body %s", s.cmd, code, raw)
		}
	}
	var list wire.SessionList
	ta.do(t, "GET", "/api/sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "work-1" {
		t.Fatalf("sessions %+v", list)
	}
	if code, raw := ta.do(t, "DELETE", "/api/sessions/work-1", nil, nil); code != 200 {
		t.Fatalf("delete: %d %s", code, raw)
	}
	if code, _ := ta.do(t, "DELETE", "/api/sessions/work-1", nil, nil); code != 404 {
		t.Fatalf("second delete: %d, want 404", code)
	}
	if code, raw := ta.do(t, "POST", "/api/sessions/Bad_ID/exec", map[string]any{"command": "true"}, nil); code != 400 ||
		!strings.Contains(errorOf(t, raw).Message, "Bad_ID") {
		t.Fatalf("bad id: %d %s", code, raw)
	}
}

func TestBadInputNamesTheProblem(t *testing.T) {
	ta := startAgent(t, func(c *agent.Config) { c.MaxRequestBytes = 1 << 10 })
	cases := []struct {
		name, path, body string
		status           int
		mention          string
	}{
		{"wrong type", "/api/tools/bash", `{"command": 5}`, 400, "command"},
		{"unknown field", "/api/tools/bash", `{"command": "true", "comand": 1}`, 400, "comand"},
		{"malformed", "/api/tools/bash", `{"command": `, 400, "JSON"},
		{"empty", "/api/tools/bash", ``, 400, "empty"},
		{"not an object", "/api/tools/bash", `[1]`, 400, "object"},
		{"trailing data", "/api/tools/bash", `{"command":"true"} {}`, 400, "after"},
		{"too large", "/api/tools/bash", `{"command": "` + strings.Repeat("x", 4<<10) + `"}`, 413, "larger"},
		{"missing command", "/api/tools/bash", `{}`, 400, "command"},
		{"bad max_output_bytes", "/api/tools/bash", `{"command":"true","max_output_bytes":"x"}`, 400, "max_output_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, raw := ta.do(t, "POST", c.path, c.body, nil)
			if code != c.status {
				t.Fatalf("status %d, want %d: %s", code, c.status, raw)
			}
			if e := errorOf(t, raw); !strings.Contains(e.Message, c.mention) {
				t.Fatalf("message %q does not mention %q", e.Message, c.mention)
			}
		})
	}
}

func TestFilesStayInsideWorkspace(t *testing.T) {
	ta := startAgent(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644)
	os.Symlink(outside, filepath.Join(ta.workspace, "link"))
	for _, p := range []string{"../x", "/etc/passwd", "link/secret", "a/../../x"} {
		code, raw := ta.do(t, "GET", "/api/fs/cat?path="+p, nil, nil)
		if code != 403 {
			t.Errorf("cat %s: %d %s, want 403", p, code, raw)
		}
		if strings.Contains(string(raw), "s3cret") {
			t.Errorf("cat %s leaked the file", p)
		}
	}
	code, raw := ta.do(t, "POST", "/api/fs/write", wire.WriteFileRequest{Path: "link/evil", Content: "x"}, nil)
	if code != 403 {
		t.Errorf("write through symlink: %d %s", code, raw)
	}
	if _, err := os.Stat(filepath.Join(outside, "evil")); err == nil {
		t.Fatal("a write escaped the workspace")
	}
}

func TestFileToolsRoundTrip(t *testing.T) {
	ta := startAgent(t)
	mustOK := func(method, path string, body any, out any) {
		t.Helper()
		if code, raw := ta.do(t, method, path, body, out); code != 200 {
			t.Fatalf("%s %s: %d %s", method, path, code, raw)
		}
	}
	mustOK("POST", "/api/tools/file/create", wire.CreateFileRequest{Path: "src/a.txt", Content: "one\ntwo\nthree\n"}, nil)
	if code, _ := ta.do(t, "POST", "/api/tools/file/create", wire.CreateFileRequest{Path: "src/a.txt", Content: "x"}, nil); code != 409 {
		t.Fatalf("create over an existing file: %d, want 409", code)
	}
	mustOK("POST", "/api/tools/file/edit", wire.EditFileRequest{Path: "src/a.txt", StartLine: 2, EndLine: 2, NewContent: "TWO"}, nil)
	patch := "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@\n one\n TWO\n-three\n+3\n"
	mustOK("POST", "/api/tools/file/patch", wire.PatchFileRequest{Path: "src/a.txt", Patch: patch}, nil)
	var rd wire.ReadResult
	mustOK("GET", "/api/fs/cat?path=src/a.txt", nil, &rd)
	if rd.Content != "one\nTWO\n3\n" {
		t.Fatalf("content %q", rd.Content)
	}
	mustOK("GET", "/api/fs/cat?path=src/a.txt&lines=true&max_bytes=6", nil, &rd)
	if rd.Content != "one\nTW" || rd.EOF {
		t.Fatalf("content at most 6 bytes: %+v", rd)
	}
	before, _ := os.ReadFile(filepath.Join(ta.workspace, "src/a.txt"))
	bad := "@@ -1,2 +1,2 @@\n one\n-nope\n+x\n"
	code, raw := ta.do(t, "POST", "/api/tools/file/patch", wire.PatchFileRequest{Path: "src/a.txt", Patch: bad}, nil)
	if code != 409 || !strings.Contains(errorOf(t, raw).Message, "hunk 1") {
		t.Fatalf("bad hunk: %d %s", code, raw)
	}
	after, _ := os.ReadFile(filepath.Join(ta.workspace, "src/a.txt"))
	if !bytes.Equal(before, after) {
		t.Fatal("a failed patch changed the file")
	}
	var ls wire.ListResult
	mustOK("GET", "/api/fs/ls?path=src", nil, &ls)
	if len(ls.Entries) != 1 || ls.Entries[0].Name != "a.txt" {
		t.Fatalf("ls %+v", ls)
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	ta := startAgent(t)
	os.MkdirAll(filepath.Join(ta.workspace, "proj/dir"), 0o755)
	os.WriteFile(filepath.Join(ta.workspace, "proj/dir/f.txt"), []byte("data"), 0o600)
	req, _ := http.NewRequest("GET", ta.url+"/api/fs/archive?path=proj", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tarball, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("download: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	code, raw := ta.do(t, "PUT", "/api/fs/archive?path=copy", tarball, nil)
	if code != 200 {
		t.Fatalf("upload: %d %s", code, raw)
	}
	got, err := os.ReadFile(filepath.Join(ta.workspace, "copy/dir/f.txt"))
	if err != nil || string(got) != "data" {
		t.Fatalf("extracted file: %q %v", got, err)
	}
}

func TestMCPBuiltinTools(t *testing.T) {
	ta := startAgent(t)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ta.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{testToken}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"create_file", "edit_file", "patch_file", "read_file", "bash"} {
		if !names[want] {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "export V=7"}})
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo $V"}})
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	out, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(out), `"stdout":"7\n"`) {
		t.Fatalf("session state lost across MCP bash calls: %s", out)
	}
}

func TestShutdownEndpointStopsTheAgent(t *testing.T) {
	ta := startAgent(t)
	if code, raw := ta.do(t, "POST", "/api/shutdown", nil, nil); code != 200 {
		t.Fatalf("shutdown: %d %s", code, raw)
	}
	select {
	case err := <-ta.done:
		ta.done <- err // for the cleanup check
	case <-time.After(30 * time.Second):
		t.Fatal("agent still running 30s after /api/shutdown")
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestListenTakesUnbracketedIPv6(t *testing.T) {
	ln, err := agent.Listen("::1:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer ln.Close()
	if a := ln.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv6loopback) {
		t.Fatalf("listening on %v, want ::1", a)
	}
}

// TestTokenInItsOwnHeader is how a request through a Kubernetes API
// server's pod proxy carries the token: the right one passes, a wrong one
// is refused like a wrong bearer token.
func TestTokenInItsOwnHeader(t *testing.T) {
	ta := startAgent(t)
	for tok, want := range map[string]int{testToken: http.StatusOK, "wrong-token-wrong-token-wrong-token": http.StatusUnauthorized} {
		req, _ := http.NewRequest("GET", ta.url+"/api/capabilities", nil)
		req.Header.Set(wire.AgentTokenHeader, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %q: status %d, want %d", wire.AgentTokenHeader, tok, resp.StatusCode, want)
		}
	}
}
