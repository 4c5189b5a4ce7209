package orchestrator_test

import (
	"context"
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
)

// BenchmarkStartServer measures a start_server call that waits for its
// operation, from the call to the running server: cold starts a new
// sandbox (the baseline), warm takes one from the warm pool, and
// warm-image one of an OCI image's warm pool (served by a registry on
// loopback). The pool is refilled, and each started server stopped,
// outside the timer.
func BenchmarkStartServer(b *testing.B) {
	reg := imagetest.NewRegistry(b)
	ref, _ := pushBashImage(b, reg, "bench/app:1")
	for _, bc := range []struct {
		name, image string
		pool        map[string]int
	}{
		{"cold", "img", nil},
		{"warm", "img", map[string]int{"img": 1}},
		{"warm-image", ref, map[string]int{ref: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			h := imageService(b, reg, orchestrator.Config{WarmPool: bc.pool})
			p := principal(b, h.Svc, "bench")
			c := registerClient(b, h.Svc, p, "bench")
			b.ResetTimer()
			for range b.N {
				if bc.pool != nil {
					b.StopTimer()
					waitWarm(b, h, bc.image)
					b.StartTimer()
				}
				res := startServer(b, h.Svc, p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: bc.image})
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
