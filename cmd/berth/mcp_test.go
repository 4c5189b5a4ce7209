package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/cliconfig"
	"github.com/berth-mcp/berth/internal/syncbuf"
)

// relayed is `berth mcp` running in-process with a client connected to
// its stdio.
type relayed struct {
	cs   *mcp.ClientSession
	done chan result
}

// startRelay runs `berth mcp args...` with stdin and stdout as pipes and
// connects an MCP client to them.
func startRelay(t *testing.T, getenv func(string) string, args ...string) *relayed {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan result, 1)
	var errOut syncbuf.Buffer
	go func() {
		err := run(context.Background(), append([]string{"mcp"}, args...), getenv, inR, outW, &errOut)
		// The client may still be waiting for an answer it will not get.
		outW.CloseWithError(io.EOF)
		done <- result{stderr: errOut.String(), err: err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		r := <-done
		t.Fatalf("connect to berth mcp: %v (berth mcp: %v, stderr %q)", err, r.err, r.stderr)
	}
	rl := &relayed{cs: cs, done: done}
	t.Cleanup(func() { rl.stop(t) })
	return rl
}

// stop closes the client, which ends stdin, and waits for berth mcp to
// return cleanly.
func (rl *relayed) stop(t *testing.T) {
	t.Helper()
	if rl.done == nil {
		return
	}
	rl.cs.Close()
	select {
	case r := <-rl.done:
		if r.err != nil {
			t.Errorf("berth mcp ended with %v\nstderr: %s", r.err, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Error("berth mcp did not return within 30s of stdin closing")
	}
	rl.done = nil
}

// direct connects straight to the server's /mcp.
func direct(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: newRemote(cliconfig.Config{URL: url, Token: token}, "").HTTP()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		tools[tool.Name] = tool
	}
	return tools
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// callOK calls a tool that must succeed and decodes its structured
// result into out.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, textOf(res))
	}
	if err := json.Unmarshal([]byte(jsonOf(t, res.StructuredContent)), out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, jsonOf(t, res.StructuredContent), err)
	}
}

func TestMCPRelay(t *testing.T) {
	isolateHome(t)
	url, e := startServer(t)
	tok, _ := e.Token(t, "alice")
	cfg := filepath.Join(t.TempDir(), "config.json")
	if r := berth(t, envMap(), nil, "login", "--url", url, "--token", tok, "--config", cfg); r.err != nil {
		t.Fatalf("login: %v", r.err)
	}
	ctx := context.Background()

	t.Run("saved login", func(t *testing.T) {
		rl := startRelay(t, envMap(), "--config", cfg)
		got := listTools(t, rl.cs)
		for _, name := range []string{"run_bash_command", "bash", "whoami"} {
			if got[name] == nil {
				t.Errorf("tool %s is not relayed", name)
			}
		}
		// Schemas, annotations and descriptions are the remote's own.
		want := listTools(t, direct(t, url, tok))
		if len(got) != len(want) {
			t.Errorf("relayed %d tools, the server has %d", len(got), len(want))
		}
		for name, w := range want {
			if g := got[name]; g == nil || jsonOf(t, g) != jsonOf(t, w) {
				t.Errorf("tool %s relayed as\n%s\nwant\n%s", name, jsonOf(t, g), jsonOf(t, w))
			}
		}
		if init := rl.cs.InitializeResult(); init == nil || !strings.Contains(init.Instructions, "register_client") {
			t.Errorf("the server's instructions are not relayed")
		}

		res, err := rl.cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil {
			t.Fatalf("call whoami: %v", err)
		}
		if res.IsError || !strings.Contains(textOf(res)+jsonOf(t, res.StructuredContent), `alice`) {
			t.Errorf("whoami answered %s", jsonOf(t, res))
		}

		// A tool error comes back as the remote's result, not a failure
		// of the relay.
		res, err = rl.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"server_id": "no-such-server", "command": "true"}})
		if err != nil {
			t.Fatalf("call bash: %v", err)
		}
		if !res.IsError || !strings.Contains(textOf(res), "no-such-server") {
			t.Errorf("bash on a missing server answered %s, want a tool error naming it", jsonOf(t, res))
		}

		// A real command in a real sandbox, all through the relay.
		var client struct{ ID string }
		callOK(t, rl.cs, "register_client", map[string]any{"request": map[string]any{"name": "relay-test"}}, &client)
		var start struct{ Status, Result string }
		callOK(t, rl.cs, "start_server", map[string]any{"request": map[string]any{"client_id": client.ID, "image_tag": "base", "wait_seconds": 120}}, &start)
		var started struct {
			ServerID string `json:"server_id"`
		}
		if err := json.Unmarshal([]byte(start.Result), &started); start.Status != "SUCCEEDED" || err != nil {
			t.Fatalf("start_server: %+v", start)
		}
		var br struct {
			Stdout   string
			ExitCode int `json:"exit_code"`
		}
		callOK(t, rl.cs, "bash", map[string]any{"server_id": started.ServerID, "command": "echo relayed; false"}, &br)
		if br.Stdout != "relayed\n" || br.ExitCode != 1 {
			t.Errorf("bash through the relay: %+v", br)
		}

		prompt, err := rl.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "berth_start_sandbox", Arguments: map[string]string{"task": "build the thing"}})
		if err != nil {
			t.Fatalf("get prompt: %v", err)
		}
		if len(prompt.Messages) == 0 || !strings.Contains(jsonOf(t, prompt.Messages), "build the thing") {
			t.Errorf("prompt answered %s", jsonOf(t, prompt))
		}
	})

	t.Run("the built binary as a desktop client starts it", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "berth")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Env = append(os.Environ(), goToolEnv...)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build berth: %v\n%s", err, out)
		}
		// {"command": "berth", "args": ["mcp"], "env": {...}}
		cmd := exec.Command(bin, "mcp")
		cmd.Env = append(os.Environ(), "BERTH_URL="+url, "BERTH_TOKEN="+tok)
		var stderr syncbuf.Buffer
		cmd.Stderr = &stderr
		progress := make(chan *mcp.ProgressNotificationParams, 64)
		client := mcp.NewClient(&mcp.Implementation{Name: "desktop-test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progressInto(progress)})
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
		}
		if tools := listTools(t, cs); tools["bash"] == nil || tools["run_bash_command"] == nil {
			t.Errorf("the binary relays %d tools, without bash or run_bash_command", len(tools))
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil || res.IsError {
			t.Fatalf("call whoami: %v %s", err, jsonOf(t, res))
		}
		relayedProgress(t, cs, progress, "desktop-7")
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v (stderr %s)", err, stderr.String())
		}
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("berth mcp ended with %v; stderr: %s", cmd.ProcessState, stderr.String())
		}
	})

	t.Run("every progress notification is on stdout before the response", func(t *testing.T) {
		var errOut syncbuf.Buffer
		rs := startRawStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
			return run(ctx, []string{"mcp"}, envMap("BERTH_URL", url, "BERTH_TOKEN", tok), in, out, &errOut)
		})
		rs.initialize(t, "2025-11-25")
		rs.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"register_client","arguments":{"request":{"name":"raw-progress"}}}}`)
		m, ok := rs.next(t, 60*time.Second)
		var client struct{ ID string }
		if !ok || json.Unmarshal([]byte(jsonOf(t, m["result"].(map[string]any)["structuredContent"])), &client) != nil || client.ID == "" {
			t.Fatalf("register_client answered %v (stderr %s)", m, errOut.String())
		}
		rs.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"start_server","_meta":{"progressToken":"raw-9"},`+
			`"arguments":{"request":{"client_id":"`+client.ID+`","image_tag":"base","wait_seconds":120}}}}`)
		var last map[string]any
		for {
			m, ok := rs.next(t, 150*time.Second)
			if !ok {
				t.Fatalf("stdout ended before start_server's response (stderr %s)", errOut.String())
			}
			if m["method"] == "notifications/progress" {
				last = m["params"].(map[string]any)
				continue
			}
			if m["id"] == float64(2) {
				break
			}
		}
		// The final stage (progress 1 of 1) comes before the result on
		// the remote, and so it must on stdout.
		if last == nil || last["progressToken"] != "raw-9" || last["progress"] != float64(1) || last["total"] != float64(1) {
			t.Errorf("the last progress before start_server's response was %v, want the final one (1 of 1) for raw-9", last)
		}
		rs.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stop_client","arguments":{"request":{"client_id":"`+client.ID+`"}}}}`)
		if m, ok := rs.next(t, 60*time.Second); !ok || m["id"] != float64(3) {
			t.Errorf("stop_client answered %v", m)
		}
	})

	t.Run("environment credentials", func(t *testing.T) {
		rl := startRelay(t, envMap("BERTH_URL", url, "BERTH_TOKEN", tok))
		res, err := rl.cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil || res.IsError {
			t.Fatalf("call whoami: %v %s", err, jsonOf(t, res))
		}
	})
}

func TestMCPRefusesMissingOrBadCredentials(t *testing.T) {
	isolateHome(t)
	url, _ := startServer(t)
	empty := filepath.Join(t.TempDir(), "none.json")
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		want   string
	}{
		{"nothing saved", envMap(), "run `berth login"},
		{"url without token", envMap("BERTH_URL", url), "set both BERTH_URL and BERTH_TOKEN"},
		{"bad token", envMap("BERTH_URL", url, "BERTH_TOKEN", "bst_wrong-token-0123456789"), "refused the token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var out, errOut syncbuf.Buffer
			// stdin never ends: berth mcp must fail before reading it.
			stdin, stdinW := io.Pipe()
			defer stdinW.Close()
			err := run(ctx, []string{"mcp", "--config", empty}, tc.getenv, stdin, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("berth mcp: %v, want an error containing %q", err, tc.want)
			}
			if out.String() != "" {
				t.Errorf("berth mcp wrote %q to stdout, which belongs to the protocol", out.String())
			}
		})
	}
}

// progressInto hands progress notifications to ch, dropping them when
// it is full rather than holding up the client.
func progressInto(ch chan<- *mcp.ProgressNotificationParams) func(context.Context, *mcp.ProgressNotificationClientRequest) {
	return func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		select {
		case ch <- req.Params:
		default:
		}
	}
}

// relayedProgress starts a sandbox through cs with a progress token and
// expects the remote's notifications/progress to arrive under that token,
// up to the final stage.
func relayedProgress(t *testing.T, cs *mcp.ClientSession, progress <-chan *mcp.ProgressNotificationParams, token string) {
	t.Helper()
	var client struct{ ID string }
	callOK(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "relay-progress"}}, &client)
	params := &mcp.CallToolParams{Name: "start_server", Arguments: map[string]any{"request": map[string]any{
		"client_id": client.ID, "image_tag": "base", "wait_seconds": 120}}}
	params.SetProgressToken(token)
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("start_server with a progress token: %v %s", err, jsonOf(t, res))
	}
	// The SDK client handles notifications apart from results: the last
	// ones may arrive after the result.
	deadline := time.After(30 * time.Second)
	for n := 0; ; n++ {
		select {
		case p := <-progress:
			if p.ProgressToken != token {
				t.Fatalf("progress for token %v, want %q", p.ProgressToken, token)
			}
			if p.Progress == 1 && p.Total == 1 {
				callOK(t, cs, "stop_client", map[string]any{"request": map[string]any{"client_id": client.ID}}, &struct{}{})
				return
			}
		case <-deadline:
			t.Fatalf("no final notifications/progress through berth mcp within 30s (%d before it)", n)
		}
	}
}
