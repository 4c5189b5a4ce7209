package bash

import (
	"context"
	"sync"

	"github.com/berth-mcp/berth/internal/wire"
)

// RunStream runs req.Command as Run does and hands its output to emit as
// it is written, with the same caps: the head of each stream as it comes,
// then, when the command has ended, the marker and tail of each, and a
// final event with the exit code. emit is called from one goroutine at a
// time; when it fails (the reader went away) the command is ended as if
// its caller's context had. The error is Run's (nothing was emitted), or
// emit's.
func (r *Runner) RunStream(ctx context.Context, req wire.BashRequest, emit func(wire.ExecEvent) error) error {
	if req.StripOutput {
		return wire.Errorf(wire.CodeBadRequest, "strip_output cannot apply to a streamed command: its output is sent as it is written")
	}
	p, err := r.plan(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &emitter{emit: emit, cancel: cancel}
	stdout := &streamWriter{e: e, name: wire.StreamStdout, out: wire.NewOutputStream(p.limit)}
	stderr := &streamWriter{e: e, name: wire.StreamStderr, out: wire.NewOutputStream(p.limit)}
	end, err := r.run(ctx, p, stdout, stderr)
	if err != nil {
		if e.sent {
			d := wire.DetailOf(err)
			return e.send(wire.ExecEvent{Error: &d})
		}
		return err
	}
	outRest, outOmitted := stdout.out.Close()
	errRest, errOmitted := stderr.out.Close()
	e.send(wire.ExecEvent{Stream: wire.StreamStdout, Data: outRest})
	e.send(wire.ExecEvent{Stream: wire.StreamStderr, Data: errRest})
	code := end.exitCode
	e.send(wire.ExecEvent{
		ExitCode: &code, TimedOut: end.timedOut, DurationMS: end.duration.Milliseconds(),
		Truncated: outOmitted > 0 || errOmitted > 0, StdoutTruncatedBytes: outOmitted, StderrTruncatedBytes: errOmitted,
	})
	return e.err
}

// emitter serialises the events of both streams and remembers the first
// failure, after which nothing more is sent.
type emitter struct {
	mu     sync.Mutex
	emit   func(wire.ExecEvent) error
	cancel context.CancelFunc
	sent   bool
	err    error
}

func (e *emitter) send(ev wire.ExecEvent) error {
	if ev.Stream != "" && ev.Data == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.sent = true
	if e.err = e.emit(ev); e.err != nil {
		e.cancel()
	}
	return e.err
}

// streamWriter is the io.Writer one output pipe is copied into.
type streamWriter struct {
	e    *emitter
	name string
	out  *wire.OutputStream // only the pipe's reader goroutine uses it
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if live := w.out.Write(p); len(live) > 0 {
		// A failed send has ended the command already; the pipe is
		// still drained so that nothing blocks on it.
		w.e.send(wire.ExecEvent{Stream: w.name, Data: string(live)})
	}
	return len(p), nil
}
