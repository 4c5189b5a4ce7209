package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/mcpserver"
)

// TestProgressNotifications asks start_server for progress: the caller
// hears the operation's stages before the result arrives.
func TestProgressNotifications(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + tok}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "p"}}, &c)
	params := &mcp.CallToolParams{Name: "start_server", Arguments: map[string]any{"request": map[string]any{
		"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}}
	params.SetProgressToken("start-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("start_server: %v %s", err, text(res))
	}
	// Notifications are handled apart from the result: wait for the last.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		var last *mcp.ProgressNotificationParams
		if n > 0 {
			last = got[n-1]
		}
		mu.Unlock()
		if last != nil && last.Progress == 1 {
			if last.ProgressToken != "start-1" || last.Total != 1 {
				t.Fatalf("last progress %+v", last)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no final progress notification; got %d, last %+v", n, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answerRecorder is an HTTP transport that remembers the Content-Type of
// the answer to each tools/call a real client sends.
type answerRecorder struct {
	token string
	mu    sync.Mutex
	types []string
}

func (a *answerRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
		a.mu.Lock()
		a.types = append(a.types, resp.Header.Get("Content-Type"))
		a.mu.Unlock()
	}
	return resp, err
}

// last is the Content-Type of the latest tools/call answer.
func (a *answerRecorder) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.types) == 0 {
		return ""
	}
	return a.types[len(a.types)-1]
}

// TestOnlyAProgressTokenGetsAnEventStream: a command that merely contains
// the word progressToken is answered as plain JSON; a call whose
// params._meta carries one gets an event stream with its progress.
func TestOnlyAProgressTokenGetsAnEventStream(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	rec := &answerRecorder{token: tok}
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: rec}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var c struct{ ID string }
	call(t, cs, "register_client", map[string]any{"request": map[string]any{"name": "p"}}, &c)
	var start struct{ Status, Result string }
	call(t, cs, "start_server", map[string]any{"request": map[string]any{"client_id": c.ID, "image_tag": "base", "wait_seconds": 120}}, &start)
	var started struct {
		ServerID string `json:"server_id"`
	}
	if err := json.Unmarshal([]byte(start.Result), &started); start.Status != "SUCCEEDED" || err != nil {
		t.Fatalf("start_server: %+v", start)
	}

	// The shell persists, so the second command is just the word: its
	// body holds the bytes "progressToken" with their quotes.
	call(t, cs, "bash", map[string]any{"server_id": started.ServerID, "command": "progressToken() { echo the word; }"}, nil)
	var out struct{ Stdout string }
	call(t, cs, "bash", map[string]any{"server_id": started.ServerID, "command": "progressToken"}, &out)
	if got := rec.last(); !strings.HasPrefix(got, "application/json") || out.Stdout != "the word\n" {
		t.Fatalf("bash command progressToken: answered as %q with %+v, want plain JSON", got, out)
	}

	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"server_id": started.ServerID, "command": "echo streamed"}}
	params.SetProgressToken("bash-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("bash with a progress token: %v %s", err, text(res))
	}
	if got := rec.last(); !strings.HasPrefix(got, "text/event-stream") {
		t.Fatalf("bash with _meta.progressToken answered as %q, want an event stream", got)
	}

	params = &mcp.CallToolParams{Name: "run_bash_command", Arguments: map[string]any{"request": map[string]any{
		"client_id": c.ID, "server_id": started.ServerID, "command": "echo progressToken", "wait_seconds": 60}}}
	params.SetProgressToken(7)
	res, err = cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("run_bash_command with a progress token: %v %s", err, text(res))
	}
	if got := rec.last(); !strings.HasPrefix(got, "text/event-stream") {
		t.Fatalf("run_bash_command with _meta.progressToken answered as %q, want an event stream", got)
	}
	select {
	case p := <-progress:
		if fmt.Sprint(p.ProgressToken) != "7" {
			t.Fatalf("progress for token %v, want 7", p.ProgressToken)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification for run_bash_command")
	}
}

// TestProgressTokenInABatch routes a batch by each message's
// params._meta.progressToken, not by the bytes of the body.
func TestProgressTokenInABatch(t *testing.T) {
	e := newEnv(t, mcpserver.GuardOptions{})
	tok, _ := e.Token(t, "alice")
	for _, c := range []struct {
		name, body string
		stream     bool
	}{
		{"word in an argument", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{"progressToken":"x"}}}]`, false},
		{"null token", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","_meta":{"progressToken":null}}}]`, false},
		{"key in another case", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","_meta":{"ProgressToken":"x"}}}]`, false},
		{"token in the second message", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","_meta":{"progressToken":"x"}}}]`, true},
		{"numeric token, one message", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","_meta":{"progressToken":3}}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("MCP-Protocol-Version", "2025-03-26")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ct := resp.Header.Get("Content-Type")
			if resp.StatusCode != 200 || strings.HasPrefix(ct, "text/event-stream") != c.stream || !strings.Contains(string(body), `"result"`) {
				t.Fatalf("status %d, Content-Type %q (want stream %v): %s", resp.StatusCode, ct, c.stream, body)
			}
		})
	}
}
