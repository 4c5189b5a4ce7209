package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// target is something commands run on: berth through one surface, or a
// bare agent. call runs one command as caller i and reports how it went.
type target interface {
	call(ctx context.Context, caller int) error
	close()
}

// result is one round of one target.
type result struct {
	calls, errors int
	p50, p99, max time.Duration
	throughput    float64 // successful calls per second
	elapsed       time.Duration
	firstErr      error
	cpu           map[string]time.Duration // per call, with --cpu
}

func (r result) String() string {
	s := fmt.Sprintf("%6d calls  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  %7.0f calls/s  errors %d",
		r.calls, ms(r.p50), ms(r.p99), ms(r.max), r.throughput, r.errors)
	if r.firstErr != nil {
		s += fmt.Sprintf(" (first: %v)", r.firstErr)
	}
	return s
}

// measureCPU is measure with, under --cpu, the CPU time the watched
// processes used during the round, per call.
func measureCPU(ctx context.Context, t target, c config) (result, error) {
	if c.cpu == nil {
		return measure(ctx, t, c)
	}
	before, err := c.cpu.sample()
	if err != nil {
		return result{}, err
	}
	r, err := measure(ctx, t, c)
	if err != nil {
		return r, err
	}
	after, err := c.cpu.sample()
	if err != nil {
		return r, err
	}
	r.cpu = cpuPerCall(before, after, r.calls)
	return r, nil
}

// measure runs c.callers callers against t until the round's time or
// count is used up. Each caller keeps its own latencies, so recording
// costs no lock on the measured path.
func measure(ctx context.Context, t target, c config) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, c.duration)
		defer stop()
	}
	var issued atomic.Int64
	lat := make([][]time.Duration, c.callers)
	errs := make([]int, c.callers)
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i := range c.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if c.count > 0 && issued.Add(1) > int64(c.count) {
					return
				}
				t0 := time.Now()
				err := t.call(ctx, i)
				if ctx.Err() != nil {
					return // the round ended during the call: it does not count
				}
				if err != nil {
					errs[i]++
					errOnce.Do(func() { firstErr = err })
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	r := result{elapsed: elapsed, firstErr: firstErr}
	for i := range lat {
		all = append(all, lat[i]...)
		r.errors += errs[i]
	}
	r.calls = len(all) + r.errors
	if len(all) == 0 {
		return r, fmt.Errorf("no call succeeded: %v", firstErr)
	}
	slices.Sort(all)
	r.p50, r.p99, r.max = all[len(all)/2], all[min(len(all)-1, len(all)*99/100)], all[len(all)-1]
	r.throughput = float64(len(all)) / elapsed.Seconds()
	return r, nil
}
