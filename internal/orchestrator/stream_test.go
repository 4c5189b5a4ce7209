package orchestrator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// A sandbox that answers the streamed exec for itself cannot send more
// than the caps, lines past their bound, or a stream without an end, and
// berth's memory does not follow it: each breaks the stream as
// bad_gateway after what was within bounds.
func TestStreamBashHostileAgent(t *testing.T) {
	const limit = 1000
	cases := map[string]struct {
		body func(w http.ResponseWriter)
		want string
	}{
		"more than the limit": {func(w http.ResponseWriter) {
			for range 100 {
				fmt.Fprintf(w, `{"stream":"stdout","data":"%s"}`+"\n", strings.Repeat("x", 100))
			}
		}, "more stdout than its limit"},
		"a line past its bound": {func(w http.ResponseWriter) {
			fmt.Fprintf(w, `{"stream":"stderr","data":"%s`, strings.Repeat("y", 1<<20))
		}, "too long"},
		"no final event": {func(w http.ResponseWriter) {
			fmt.Fprintln(w, `{"stream":"stdout","data":"hi"}`)
		}, "final event"},
		"an unknown stream": {func(w http.ResponseWriter) {
			fmt.Fprintln(w, `{"stream":"stdin","data":"hi"}`)
		}, "unknown stream"},
		"empty pieces": {func(w http.ResponseWriter) {
			for range 1000 {
				fmt.Fprintln(w, `{"stream":"stdout"}`)
			}
		}, "empty piece"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /api/tools/bash/stream", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", wire.NDJSONType)
				tc.body(w)
			})
			h := newHostile(t, orchestrator.Config{MaxOutputBytes: limit}, mux)
			var got int
			_, err := h.e.Svc.StreamBash(context.Background(), h.alice, orchestrator.StreamBashRequest{ServerID: h.server, Command: "true"},
				func(ev wire.ExecEvent) error { got += len(ev.Data); return nil })
			if d := wire.DetailOf(err); err == nil || d.Code != wire.CodeBadGateway || !strings.Contains(d.Message, tc.want) {
				t.Fatalf("got %v, want bad_gateway naming %q", err, tc.want)
			}
			if got > limit+1024 {
				t.Fatalf("passed on %d bytes of a %d-byte limit", got, limit)
			}
		})
	}
}
