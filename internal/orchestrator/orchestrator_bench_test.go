package orchestrator_test

import (
	"context"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// BenchmarkStartServer measures a start_server call that waits for its
// operation, from the call to the running server: cold starts a new
// sandbox (the baseline), warm takes one from the warm pool. The pool is
// refilled, and each started server stopped, outside the timer.
func BenchmarkStartServer(b *testing.B) {
	for _, bc := range []struct {
		name string
		pool map[string]int
	}{
		{"cold", nil},
		{"warm", map[string]int{"img": 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			h := newService(b, orchestrator.Config{WarmPool: bc.pool})
			p := principal(b, h.Svc, "bench")
			c := registerClient(b, h.Svc, p, "bench")
			b.ResetTimer()
			for range b.N {
				if bc.pool != nil {
					b.StopTimer()
					waitWarm(b, h, "img")
					b.StartTimer()
				}
				res := startServer(b, h.Svc, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"})
				b.StopTimer()
				if res.Warm != (bc.pool != nil) {
					b.Fatalf("warm = %v", res.Warm)
				}
				if _, err := h.Svc.StopServer(ctx, p, orchestrator.ServerRef{ServerID: res.ServerID}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
