package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/cliconfig"
)

// TestRelayFollowsToolListChanges runs the relay against a stateful MCP
// server (berth's own /mcp is stateless and never announces changes) and
// checks that tools it adds and removes later show up on the stdio side.
func TestRelayFollowsToolListChanges(t *testing.T) {
	upstream := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	echo := func(name string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		}
	}
	schema := map[string]any{"type": "object"}
	upstream.AddTool(&mcp.Tool{Name: "first", InputSchema: schema}, echo("first"))
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstream }, nil))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serveMCPRelay(ctx, newRemote(cliconfig.Config{URL: srv.URL, Token: "unused"}, ""), inR, outW, slog.New(slog.DiscardHandler))
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatalf("list tools: %v", err)
			}
			out = append(out, tool.Name)
		}
		sort.Strings(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("relayed %v, want [first]", got)
	}

	upstream.AddTool(&mcp.Tool{Name: "second", InputSchema: schema}, echo("second"))
	upstream.RemoveTools("first")
	deadline := time.After(30 * time.Second)
	for got := names(); !slices.Equal(got, []string{"second"}); got = names() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("relayed %v 30s after the upstream changed, want [second]", got)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "second"})
	if err != nil || textOf(res) != "second" {
		t.Fatalf("call second: %v %v", err, res)
	}

	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not return after stdin closed")
	}
}
