package session

import (
	"bytes"
	"context"
	"os/exec"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// BenchmarkSessionTrue compares a call on a warm session with the cost of
// a one-shot bash (fork and exec of bash with piped output), which is
// what every one-shot call pays.
func BenchmarkSessionTrue(b *testing.B) {
	b.Run("session", func(b *testing.B) {
		m := NewManager(Options{Workspace: b.TempDir()})
		defer m.Close()
		ctx := context.Background()
		req := wire.SessionExecRequest{Command: "true"}
		if _, err := m.Exec(ctx, "bench", req); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			res, err := m.Exec(ctx, "bench", req)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	})
	b.Run("oneshot", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			cmd := exec.Command("bash", "-c", "true")
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
