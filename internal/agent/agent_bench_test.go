package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkBashTrue compares running `true` through the agent's HTTP API
// (one-shot and in a persistent session) with a bare fork/exec of bash in
// the same process, so ratios come from one run on one machine.
func BenchmarkBashTrue(b *testing.B) {
	ta := startAgent(b)
	b.Run("bare-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("agent-oneshot", func(b *testing.B) {
		for b.Loop() {
			if code, raw := ta.do(b, "POST", "/api/tools/bash", map[string]any{"command": "true"}, nil); code != 200 {
				b.Fatalf("%d %s", code, raw)
			}
		}
	})
	// What berth sends for run_bash_command: the command under an
	// operation id, then the release of its kept answer.
	b.Run("agent-oneshot-operation", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			id := fmt.Sprintf("bench-%d", n)
			if code, raw := ta.do(b, "POST", "/api/tools/bash", map[string]any{"command": "true", "operation_id": id}, nil); code != 200 {
				b.Fatalf("%d %s", code, raw)
			}
			if code, raw := ta.do(b, "DELETE", "/api/operations/"+id, nil, nil); code != 204 {
				b.Fatalf("%d %s", code, raw)
			}
		}
	})
	b.Run("agent-session", func(b *testing.B) {
		ta.do(b, "POST", "/api/sessions/bench/exec", map[string]any{"command": "true"}, nil)
		for b.Loop() {
			if code, raw := ta.do(b, "POST", "/api/sessions/bench/exec", map[string]any{"command": "true"}, nil); code != 200 {
				b.Fatalf("%d %s", code, raw)
			}
		}
	})
}

// BenchmarkExecInterleaved is issue 11's measure of the agent: each of
// b.N rounds runs a bare `bash -c true` fork, the agent's one-shot
// /api/tools/bash and a session exec one after the other (A, B, C, A, B,
// C...), each for callsPerRound calls spread over the callers, so a
// loaded machine moves all three alike. It reports the medians over the
// rounds of the ratios, with their lowest and highest as the spread:
// one-shot p50 over bare p50, and a session exec's p99 over its own p50.
// Run it with -benchtime=Nx: N is the number of rounds.
func BenchmarkExecInterleaved(b *testing.B) {
	const callsPerRound = 400
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			ta := startAgent(b)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
			post := func(path string) error {
				req, err := http.NewRequest("POST", ta.url+path, bytes.NewReader([]byte(`{"command":"true"}`)))
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				raw, err := io.ReadAll(resp.Body)
				if err != nil {
					return err
				}
				var res struct {
					ExitCode int `json:"exit_code"`
				}
				if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil || res.ExitCode != 0 {
					return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
				}
				return nil
			}
			sides := []struct {
				name string
				call func(caller int) error
			}{
				{"bare", func(int) error { return exec.Command("bash", "-c", "true").Run() }},
				{"oneshot", func(int) error { return post("/api/tools/bash") }},
				{"session", func(i int) error { return post(fmt.Sprintf("/api/sessions/bench-%d/exec", i)) }},
			}
			for i := range callers { // start the shells outside the rounds
				if err := sides[2].call(i); err != nil {
					b.Fatal(err)
				}
			}
			var oneshotRatio, sessionTail, oneshotP99 []float64
			stats := make(map[string][]float64)
			b.ResetTimer()
			for b.Loop() {
				p := map[string][2]time.Duration{}
				for _, s := range sides {
					p50, p99, err := round(callers, callsPerRound, s.call)
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					p[s.name] = [2]time.Duration{p50, p99}
					stats[s.name+"-p50-us"] = append(stats[s.name+"-p50-us"], float64(p50.Microseconds()))
					stats[s.name+"-p99-us"] = append(stats[s.name+"-p99-us"], float64(p99.Microseconds()))
				}
				oneshotRatio = append(oneshotRatio, float64(p["oneshot"][0])/float64(p["bare"][0]))
				oneshotP99 = append(oneshotP99, float64(p["oneshot"][1])/float64(p["bare"][1]))
				sessionTail = append(sessionTail, float64(p["session"][1])/float64(p["session"][0]))
			}
			b.StopTimer()
			report(b, "oneshot/bare-p50", oneshotRatio)
			report(b, "oneshot/bare-p99", oneshotP99)
			report(b, "session-p99/p50", sessionTail)
			for _, k := range []string{"bare-p50-us", "oneshot-p50-us", "session-p50-us", "session-p99-us"} {
				b.ReportMetric(median(stats[k]), k)
			}
		})
	}
}

// round runs n calls over callers goroutines and returns the p50 and p99
// latency of one call.
func round(callers, n int, call func(caller int) error) (p50, p99 time.Duration, err error) {
	lat := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range n / callers {
				t0 := time.Now()
				if err := call(i); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for i := range lat {
		if errs[i] != nil {
			return 0, 0, errs[i]
		}
		all = append(all, lat[i]...)
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)*99/100], nil
}

// report puts the median of v as the metric name and its lowest and
// highest as name-min and name-max.
func report(b *testing.B, name string, v []float64) {
	b.ReportMetric(median(v), name)
	b.ReportMetric(slices.Min(v), name+"-min")
	b.ReportMetric(slices.Max(v), name+"-max")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
