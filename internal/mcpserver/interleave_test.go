package mcpserver_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// interleaved runs base and subject in alternating rounds (A, B, A, B...)
// so a loaded machine slows both alike, each round `calls` calls spread
// over `callers` goroutines, and reports the median of the per-round
// ratios of subject's time to base's (slowdown: how many times longer
// subject takes) with their spread, the median throughput ratio (its
// inverse) and each side's median time per call. b.N counts rounds.
func interleaved(b *testing.B, calls, callers int, base, subject func()) {
	b.Helper()
	round := func(fn func()) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < calls; i += callers {
					fn()
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	base()
	subject()
	var ratios, baseTimes, subjTimes []float64
	for b.Loop() {
		tb, ts := round(base), round(subject)
		ratios = append(ratios, float64(ts)/float64(tb))
		baseTimes = append(baseTimes, float64(tb.Nanoseconds())/float64(calls))
		subjTimes = append(subjTimes, float64(ts.Nanoseconds())/float64(calls))
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(ratios), "slowdown-median")
	b.ReportMetric(slices.Min(ratios), "slowdown-min")
	b.ReportMetric(slices.Max(ratios), "slowdown-max")
	b.ReportMetric(1/med(ratios), "throughput-ratio")
	b.ReportMetric(med(baseTimes), "base-ns/call")
	b.ReportMetric(med(subjTimes), "berth-ns/call")
	b.Log(fmt.Sprintf("slowdown (berth time / base time) per round: %.2f", ratios))
}
