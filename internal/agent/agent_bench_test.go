package agent_test

import (
	"os/exec"
	"testing"
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
	b.Run("agent-session", func(b *testing.B) {
		ta.do(b, "POST", "/api/sessions/bench/exec", map[string]any{"command": "true"}, nil)
		for b.Loop() {
			if code, raw := ta.do(b, "POST", "/api/sessions/bench/exec", map[string]any{"command": "true"}, nil); code != 200 {
				b.Fatalf("%d %s", code, raw)
			}
		}
	})
}
