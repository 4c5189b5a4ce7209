package bash

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// BenchmarkOneShotTrue compares the Runner's overhead per call with a bare
// exec of bash -c true.
func BenchmarkOneShotTrue(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner", func(b *testing.B) {
		r := &Runner{Workspace: b.TempDir()}
		for b.Loop() {
			res, err := r.Run(context.Background(), wire.BashRequest{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	})
}

// BenchmarkStream100MB compares streaming 100 MB of output through the
// Runner's bounded capture with cat writing it to /dev/null.
func BenchmarkStream100MB(b *testing.B) {
	const size = 100 << 20
	dir := b.TempDir()
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("cat", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := exec.Command("bash", "-c", fmt.Sprintf("cat %q > /dev/null", file)).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner", func(b *testing.B) {
		b.SetBytes(size)
		r := &Runner{Workspace: dir}
		req := wire.BashRequest{Command: fmt.Sprintf("cat %q", file), MaxOutputBytes: wire.Int64(1 << 20)}
		for b.Loop() {
			res, err := r.Run(context.Background(), req)
			if err != nil || res.StdoutTruncatedBytes != size-(1<<20) {
				b.Fatalf("truncated %d, err %v", res.StdoutTruncatedBytes, err)
			}
		}
	})
}

// BenchmarkOneShotHeredoc runs a command carrying 100 KB of heredoc, the
// way agents write files, against bare bash given the same text in a
// regular file (which bash reads in blocks).
func BenchmarkOneShotHeredoc(b *testing.B) {
	dir := b.TempDir()
	cmd := "cat > out <<'EOF'\n" + strings.Repeat(strings.Repeat("y", 99)+"\n", 1000) + "EOF\n"
	file := filepath.Join(dir, "script")
	if err := os.WriteFile(file, []byte(cmd), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("bare-file", func(b *testing.B) {
		for b.Loop() {
			c := exec.Command("bash", file)
			c.Dir = dir
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runner", func(b *testing.B) {
		r := &Runner{Workspace: dir}
		for b.Loop() {
			res, err := r.Run(context.Background(), wire.BashRequest{Command: cmd})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%+v %v", res, err)
			}
		}
	})
}
