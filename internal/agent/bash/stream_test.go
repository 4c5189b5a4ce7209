package bash

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/agent/output"
	"github.com/berth-mcp/berth/internal/wire"
)

// collect runs req with RunStream and returns the events, passing each
// to seen first.
func collect(t *testing.T, r *Runner, req wire.BashRequest, seen func(wire.ExecEvent)) []wire.ExecEvent {
	t.Helper()
	var evs []wire.ExecEvent
	err := r.RunStream(context.Background(), req, func(ev wire.ExecEvent) error {
		if seen != nil {
			seen(ev)
		}
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("RunStream(%q): %v", req.Command, err)
	}
	if len(evs) == 0 || evs[len(evs)-1].ExitCode == nil {
		t.Fatalf("no final event: %+v", evs)
	}
	return evs
}

func joined(evs []wire.ExecEvent, stream string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Stream == stream {
			b.WriteString(ev.Data)
		}
	}
	return b.String()
}

// The first line reaches the caller while the command still runs: the
// command waits for a file the test creates only once it has the line.
func TestStreamSendsOutputAsWritten(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	gate := filepath.Join(ws, "gate")
	cmd := `echo first; echo warn >&2; while [ ! -e gate ]; do sleep 0.01; done; echo second; exit 7`
	evs := collect(t, r, wire.BashRequest{Command: cmd, CommandTimeout: f64(30)}, func(ev wire.ExecEvent) {
		if ev.Stream == wire.StreamStdout && ev.Data == "first\n" {
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	})
	end := evs[len(evs)-1]
	if *end.ExitCode != 7 || end.TimedOut || end.Truncated {
		t.Fatalf("final event %+v", end)
	}
	if out, errs := joined(evs, wire.StreamStdout), joined(evs, wire.StreamStderr); out != "first\nsecond\n" || errs != "warn\n" {
		t.Fatalf("stdout %q stderr %q", out, errs)
	}
}

// The stream keeps what Run keeps: head and tail around one marker.
func TestStreamCapsLikeRun(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	req := wire.BashRequest{Command: "printf 0123456789; printf abcdefghij >&2", MaxOutputBytes: wire.Int64(4)}
	evs := collect(t, r, req, nil)
	end := evs[len(evs)-1]
	if got := joined(evs, wire.StreamStdout); got != "01"+output.Marker(6)+"89" {
		t.Fatalf("stdout %q", got)
	}
	if got := joined(evs, wire.StreamStderr); got != "ab"+output.Marker(6)+"ij" {
		t.Fatalf("stderr %q", got)
	}
	if !end.Truncated || end.StdoutTruncatedBytes != 6 || end.StderrTruncatedBytes != 6 {
		t.Fatalf("final event %+v", end)
	}
}

// 200 MB through a 1 MiB cap: bounded memory, head and tail kept.
func TestStreamHugeOutputIsBounded(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	const total = 200_000_000
	var sent int
	evs := collect(t, r, wire.BashRequest{Command: "echo start; head -c 200000000 /dev/zero | tr '\\0' x; echo; echo end"}, func(ev wire.ExecEvent) {
		sent += len(ev.Data)
	})
	end := evs[len(evs)-1]
	limit := int(wire.DefaultMaxOutputBytes)
	if sent > limit+100 || end.StdoutTruncatedBytes < total-int64(limit) {
		t.Fatalf("sent %d bytes, omitted %d", sent, end.StdoutTruncatedBytes)
	}
	out := joined(evs, wire.StreamStdout)
	if !strings.HasPrefix(out, "start\nxxx") || !strings.HasSuffix(out, "xxx\nend\n") || !strings.Contains(out, output.Marker(end.StdoutTruncatedBytes)) {
		t.Fatalf("want head, marker and tail")
	}
}

func TestStreamTimeout(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	start := time.Now()
	evs := collect(t, r, wire.BashRequest{Command: "echo partial; sleep 1000", CommandTimeout: f64(1), GracefulTerminationTimeout: f64(1)}, nil)
	end := evs[len(evs)-1]
	if !end.TimedOut || *end.ExitCode != 124 || joined(evs, wire.StreamStdout) != "partial\n" {
		t.Fatalf("got %+v", evs)
	}
	if time.Since(start) < time.Second {
		t.Fatal("ended before its timeout")
	}
}

// A reader that goes away ends the command.
func TestStreamReaderGoneEndsCommand(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	start := time.Now()
	err := r.RunStream(context.Background(), wire.BashRequest{Command: "echo x; sleep 1000"}, func(wire.ExecEvent) error {
		return os.ErrClosed
	})
	if err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}
