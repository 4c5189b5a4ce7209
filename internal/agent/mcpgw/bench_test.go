package mcpgw

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUpstreamCall measures what the gateway adds to a tool call:
// "direct" calls the upstream's echo tool with a client of its own (the
// baseline), "gateway" calls alpha_echo through the gateway.
func BenchmarkUpstreamCall(b *testing.B) {
	up := startUpstream(b, "alpha", "", streamableStateless, "")
	h := newHarness(b, func(dir string) {
		writeConfig(b, dir, "alpha.json", fmt.Sprintf(`{"url": %q}`, up.url()))
	})
	waitFor(b, "alpha's tools", func() bool { return h.upstream("alpha").connected })

	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: up.url()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()

	run := func(b *testing.B, cs *mcp.ClientSession, tool string) {
		args := map[string]any{"text": "hello"}
		for b.Loop() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("call %s: %v %v", tool, err, res)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, direct, "echo") })
	b.Run("gateway", func(b *testing.B) { run(b, h.session, "alpha_echo") })
}
