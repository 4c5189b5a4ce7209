//go:build linux

package local_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/runtime"
)

// BenchmarkStartImage measures a sandbox's start (Create until the agent
// answers) from a cached OCI image against a start from the host system
// (base), interleaved in one run, the order alternating, so that the
// machine's load weighs on both alike. The image has 8 layers, as
// python:3.12 has, the host's bash and libraries in the first; it is
// pulled once before the timing. Each sandbox is deleted untimed. It
// reports the median of each and their ratio (goal: at most 1.5).
func BenchmarkStartImage(b *testing.B) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(b)
	layers := []imagetest.Layer{imagetest.GzLayer(b, imagetest.HostRootfs(b))}
	for i := 1; i < 8; i++ {
		layers = append(layers, imagetest.GzLayer(b, imagetest.Tar(b, imagetest.Dir(fmt.Sprintf("usr/share/layer%d/", i)),
			imagetest.File(fmt.Sprintf("usr/share/layer%d/file", i), "layer\n"))))
	}
	reg.Push(b, "bench/app:1", imagetest.ImageSpec{}, layers...)
	ref := reg.Host + "/bench/app:1"
	r := imageRuntime(b, dataDir(b), reg)
	n := 0
	start := func(tag string) time.Duration {
		n++
		id := fmt.Sprintf("bench-%d", n)
		t0 := time.Now()
		if err := r.Create(ctx, runtime.Spec{ServerID: id, ImageTag: tag, AgentToken: token}); err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := r.WaitReady(wctx, id)
		cancel()
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
		return d
	}
	start(ref) // the pull
	var host, image []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			host = append(host, start("base"))
			image = append(image, start(ref))
		} else {
			image = append(image, start(ref))
			host = append(host, start("base"))
		}
	}
	b.StopTimer()
	h, m := median(host), median(image)
	b.ReportMetric(float64(h.Microseconds())/1000, "host-ms")
	b.ReportMetric(float64(m.Microseconds())/1000, "image-ms")
	b.ReportMetric(float64(m)/float64(h), "image/host")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
