package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/cliconfig"
)

// rawStdio is `berth mcp`'s stdio seen as a desktop client sees it: lines
// written to stdin and lines read from stdout, with no SDK in between to
// reorder or wait for anything.
type rawStdio struct {
	in    *io.PipeWriter
	lines chan json.RawMessage
	done  chan error
}

// startRawRelay runs the relay against upstream and reads its stdout line
// by line until it ends.
func startRawRelay(t *testing.T, upstream *mcp.Server) *rawStdio {
	t.Helper()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstream }, nil))
	t.Cleanup(srv.Close)
	return startRawStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return serveMCPRelay(ctx, newRemote(cliconfig.Config{URL: srv.URL, Token: "unused"}, ""), in, out, slog.New(slog.DiscardHandler))
	})
}

// startRawStdio runs serve with pipes for stdin and stdout and reads its
// stdout line by line until it ends.
func startRawStdio(t *testing.T, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *rawStdio {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	rs := &rawStdio{in: inW, lines: make(chan json.RawMessage, 64), done: make(chan error, 1)}
	go func() {
		err := serve(ctx, inR, outW)
		outW.CloseWithError(io.EOF)
		rs.done <- err
	}()
	go func() {
		defer close(rs.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			rs.lines <- json.RawMessage(append([]byte(nil), sc.Bytes()...))
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-rs.done:
			if err != nil {
				t.Errorf("relay: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("relay did not return within 30s of stdin closing")
		}
	})
	return rs
}

func (rs *rawStdio) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(rs.in, msg+"\n"); err != nil {
		t.Fatalf("write %s: %v", msg, err)
	}
}

// next returns the next line of stdout, failing the test when none comes
// within the deadline.
func (rs *rawStdio) next(t *testing.T, within time.Duration) (map[string]any, bool) {
	t.Helper()
	select {
	case line, ok := <-rs.lines:
		if !ok {
			return nil, false
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout line %s: %v", line, err)
		}
		return m, true
	case <-time.After(within):
		t.Fatalf("nothing on stdout within %s", within)
		return nil, false
	}
}

// initialize runs the handshake and returns the initialize result.
func (rs *rawStdio) initialize(t *testing.T, version string) map[string]any {
	t.Helper()
	rs.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version))
	m, ok := rs.next(t, 30*time.Second)
	if !ok || m["result"] == nil {
		t.Fatalf("initialize answered %v", m)
	}
	rs.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m["result"].(map[string]any)
}

// TestRelayWritesProgressBeforeTheResponse: every progress notification
// the remote sends during a call is on stdout before the call's
// response, without the client writing anything more. Clients drop
// progress that arrives after the response.
func TestRelayWritesProgressBeforeTheResponse(t *testing.T) {
	const steps = 3
	upstream := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	upstream.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= steps; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: steps,
				}); err != nil {
					return nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	for run := range 5 {
		rs := startRawRelay(t, upstream)
		rs.initialize(t, "2025-11-25")
		rs.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{},"_meta":{"progressToken":"tok-%d"}}}`, run))
		var got []float64
		for {
			m, ok := rs.next(t, 30*time.Second)
			if !ok {
				t.Fatalf("run %d: stdout ended before the response", run)
			}
			if m["method"] == "notifications/progress" {
				p := m["params"].(map[string]any)
				if p["progressToken"] != fmt.Sprintf("tok-%d", run) {
					t.Fatalf("run %d: progress for %v", run, p["progressToken"])
				}
				got = append(got, p["progress"].(float64))
				continue
			}
			if m["id"] == float64(1) {
				break
			}
		}
		if len(got) != steps {
			t.Errorf("run %d: %d progress notifications before the response (%v), want %d", run, len(got), got, steps)
		}
		rs.in.Close()
	}
}

// TestRelayAnswersBeforeExiting: a client that writes a request and
// closes stdin at once (a one-shot script, or a client shutting down)
// still gets its answer before the relay exits.
func TestRelayAnswersBeforeExiting(t *testing.T) {
	upstream := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	upstream.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}}}, nil
		})
	for run := range 10 {
		rs := startRawRelay(t, upstream)
		rs.initialize(t, "2025-11-25")
		rs.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		rs.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		rs.in.Close()
		answered := map[float64]bool{}
		for {
			m, ok := rs.next(t, 30*time.Second)
			if !ok {
				break
			}
			if id, ok := m["id"].(float64); ok && m["result"] != nil {
				answered[id] = true
			}
		}
		if !answered[1] || !answered[2] {
			t.Errorf("run %d: the relay exited having answered %v of requests 1 and 2", run, answered)
		}
	}
}

// meta2026 is the per-request _meta a 2026-07-28 client sends in place
// of the initialize handshake.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// TestRelaySpeaks2026: a 2026-07-28 client discovers the version with
// server/discover and calls tools with per-request _meta, without
// initialize; a client that still sends initialize asking for 2026-07-28
// is answered 2025-11-25, the newest version that has the handshake, as
// berth's HTTP endpoint answers it.
func TestRelaySpeaks2026(t *testing.T) {
	upstream := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	upstream.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}}}, nil
		})

	rs := startRawRelay(t, upstream)
	rs.send(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026+`}}`)
	m, ok := rs.next(t, 30*time.Second)
	res, _ := m["result"].(map[string]any)
	if !ok || res == nil || !slices.Contains(res["supportedVersions"].([]any), any("2026-07-28")) {
		t.Fatalf("server/discover answered %v, want 2026-07-28 among the supported versions", m)
	}
	rs.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},`+meta2026+`}}`)
	m, ok = rs.next(t, 30*time.Second)
	res, _ = m["result"].(map[string]any)
	if !ok || res == nil || res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "echoed") {
		t.Fatalf("a 2026-07-28 tools/call answered %v", m)
	}

	legacy := startRawRelay(t, upstream)
	if got := legacy.initialize(t, "2026-07-28")["protocolVersion"]; got != "2025-11-25" {
		t.Errorf("initialize asking for 2026-07-28 answered %v, want 2025-11-25", got)
	}
}
