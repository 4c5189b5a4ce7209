package telemetry_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-mcp/berth/internal/telemetry"
	"github.com/berth-mcp/berth/internal/tracing"
)

// TestToolCallSpanTree: one MCP tool call carrying a caller's W3C
// traceparent yields, in the caller's trace, the request's server span
// (the caller's span its parent), the tool's span under it, the database
// queries and the command under the tool, the agent call under the
// command; and the agent gets a traceparent naming that agent call.
func TestToolCallSpanTree(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, telemetry.Set{Tracing: tracing.New(tp)})
	tok, _ := e.Token(t, "alice")
	_, serverID := e.startServer(t, tok, nil)

	// The agent's place is taken by a stand-in that records what trace
	// context reached it.
	var mu sync.Mutex
	var agentParent string
	e.StandIn(t, serverID, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agentParent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"stdout":"hi\n","stderr":"","exit_code":0,"duration_ms":1,"timed_out":false,"stdout_truncated_bytes":0,"stderr_truncated_bytes":0}`))
	}))

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	e.callTool(t, tok, "bash", map[string]any{"server_id": serverID, "command": "echo hi"},
		map[string]string{"Traceparent": "00-" + traceID + "-" + callerSpan + "-01"})

	// The request's span ends once its answer was written: wait for it.
	var spans []sdktrace.ReadOnlySpan
	var root sdktrace.ReadOnlySpan
	for end := time.Now().Add(deadline); root == nil; {
		if time.Now().After(end) {
			t.Fatalf("no POST /mcp span in trace %s; spans: %v", traceID, names(spans))
		}
		spans = spans[:0]
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() == traceID {
				spans = append(spans, s)
				if s.Name() == "POST /mcp" {
					root = s
				}
			}
		}
		if root == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if root.Parent().SpanID().String() != callerSpan || !root.Parent().IsRemote() || root.SpanKind() != trace.SpanKindServer {
		t.Errorf("request span's parent %s (remote %v, kind %v), want the caller's %s", root.Parent().SpanID(), root.Parent().IsRemote(), root.SpanKind(), callerSpan)
	}
	children := func(parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(parent sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
		t.Helper()
		got := children(parent, name)
		if len(got) != 1 {
			t.Fatalf("%d %q spans under %q, want 1; the trace: %v", len(got), name, parent.Name(), names(spans))
		}
		return got[0]
	}
	tool := one(root, "tool bash")
	if len(children(tool, "db query")) == 0 {
		t.Errorf("no database query under the tool; the trace: %v", names(spans))
	}
	agent := one(one(tool, "exec session"), "agent call")
	mu.Lock()
	defer mu.Unlock()
	if want := "00-" + traceID + "-" + agent.SpanContext().SpanID().String() + "-01"; agentParent != want {
		t.Errorf("the agent got traceparent %q, want %q (the agent call's span)", agentParent, want)
	}
}

// names lists spans as name <- parent name, for failure messages.
func names(spans []sdktrace.ReadOnlySpan) []string {
	byID := map[trace.SpanID]string{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s.Name()
	}
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+" <- "+byID[s.Parent().SpanID()])
	}
	return out
}
