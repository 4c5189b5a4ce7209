//go:build linux

package image

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
)

// benchLayer is a layer of files like a real image's: some compress
// well (text, code), most not (binaries, compressed data).
func benchLayer(t testing.TB, seed uint64, files, size int) testLayer {
	rng := rand.New(rand.NewPCG(seed, seed))
	words := strings.Fields("func return if else for range package import type struct interface error nil true false var const")
	ents := []ent{dir(fmt.Sprintf("usr/lib/b%d/", seed))}
	for i := range files {
		b := make([]byte, size)
		if i%4 == 0 {
			var sb strings.Builder
			for sb.Len() < size {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(" \n\t"[rng.IntN(3)])
			}
			b = []byte(sb.String()[:size])
		} else {
			for j := 0; j+8 <= len(b); j += 8 {
				v := rng.Uint64()
				for k := range 8 {
					b[j+k] = byte(v >> (8 * k))
				}
			}
		}
		ents = append(ents, file(fmt.Sprintf("usr/lib/b%d/f%d", seed, i), string(b)))
	}
	return gzLayer(t, tarOf(t, ents...))
}

// BenchmarkFirstPull pulls a ~100 MB image from a registry on loopback
// into an empty cache (download, digest checks, unpack, sync) and, in
// the same run, interleaved, with go-containerregistry's own crane.Pull
// and crane.Save to a tarball on the same disk (what `crane pull` does).
// crane/berth is the ratio of their times: 1 is as fast as crane, the
// target is at least 0.5. export/berth compares with crane.Export of the
// pulled image to a tar file, which decompresses the layers as berth
// must (crane.Save copies the compressed blobs).
//
// The image is 4 layers of 240 files or, as many real images are
// dominated by one layer, 1 layer of 960.
//
//	go test -run '^$' -bench FirstPull -benchtime 5x ./internal/image/
func BenchmarkFirstPull(b *testing.B) {
	for _, n := range []int{4, 1} {
		b.Run(fmt.Sprintf("layers=%d", n), func(b *testing.B) { benchFirstPull(b, n) })
	}
}

func benchFirstPull(b *testing.B, nLayers int) {
	r := newRegistry(b)
	var layers []testLayer
	var total int
	for i := range nLayers {
		l := benchLayer(b, uint64(i+1), 960/nLayers, 128<<10)
		layers = append(layers, l)
		total += len(l.Blob)
	}
	r.Push(b, "bench/big:1", imageSpec{}, layers...)
	ref := r.Host + "/bench/big:1"
	// Both write here: BERTH_IMAGE_BENCH_DIR picks the disk (see
	// docs/benchmarks.md for why the filesystem matters).
	work := b.TempDir()
	if d := os.Getenv("BERTH_IMAGE_BENCH_DIR"); d != "" {
		var err error
		if work, err = os.MkdirTemp(d, "bench"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(work)
	}
	var tars int
	for _, l := range layers {
		tars += l.Size
	}
	b.Logf("image: %d layers, %.1f MB compressed, %.1f MB of tar", len(layers), float64(total)/1e6, float64(tars)/1e6)

	var tBerth, tCrane, tExport time.Duration
	b.ResetTimer()
	for i := range b.N {
		runCrane := func() {
			out := filepath.Join(work, "crane.tar")
			start := time.Now()
			img, err := crane.Pull(ref, crane.Insecure)
			if err == nil {
				err = crane.Save(img, ref, out)
			}
			tCrane += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(out)
			b.StartTimer()
		}
		// crane export: the image's filesystem flattened into one tar,
		// which decompresses every layer as berth must.
		runExport := func() {
			out := filepath.Join(work, "export.tar")
			start := time.Now()
			img, err := crane.Pull(ref, crane.Insecure)
			if err == nil {
				var f *os.File
				if f, err = os.Create(out); err == nil {
					err = crane.Export(img, f)
					f.Close()
				}
			}
			tExport += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(out)
			b.StartTimer()
		}
		runBerth := func() {
			b.StopTimer()
			dir := filepath.Join(work, fmt.Sprintf("cache%d", i))
			c := openCache(b, r, Options{Dir: dir})
			b.StartTimer()
			start := time.Now()
			_, err := c.Ensure(context.Background(), ref, Pull{})
			tBerth += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			// The layers' background sync is not the pull's latency, but
			// it is not to slow crane's turn either.
			c.Close()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		if i%2 == 0 {
			runCrane()
			runBerth()
			runExport()
		} else {
			runExport()
			runBerth()
			runCrane()
		}
	}
	b.StopTimer()
	mb := float64(total) / 1e6 * float64(b.N)
	b.ReportMetric(mb/tBerth.Seconds(), "berth-MB/s")
	b.ReportMetric(mb/tCrane.Seconds(), "crane-MB/s")
	b.ReportMetric(tCrane.Seconds()/tBerth.Seconds(), "crane/berth")
	b.ReportMetric(tExport.Seconds()/tBerth.Seconds(), "export/berth")
}
