package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// jsonRaw keeps an answer's JSON as it came for writeJSON.
func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }

// jsonInto decodes an operation's result.
func jsonInto(raw json.RawMessage, out any) error {
	if len(raw) == 0 {
		return wire.Errorf(wire.CodeBadGateway, "the operation succeeded without a result")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return wire.Errorf(wire.CodeBadGateway, "the operation's result is not what berth answers: %v", err)
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// pollWait is how long one status call waits on the server for the
// operation to finish: the server holds the call, so this is no sleep.
const pollWait = 2

// waitOperation waits until op finishes or timeout passes, showing
// progress on stderr: a spinner on a terminal, and otherwise a line per
// status change when lines is set (berth exec's stderr is the command's).
// A failed or cancelled operation is an error naming why.
func waitOperation(ctx context.Context, e *env, r *remote, op orchestrator.Operation, what string, timeout time.Duration, lines bool) (orchestrator.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	show := newProgress(e.stderr, what, lines)
	defer show.stop()
	for {
		switch op.Status {
		case orchestrator.OpSucceeded:
			return op, nil
		case orchestrator.OpFailed, orchestrator.OpCancelled:
			return op, fmt.Errorf("%s: operation %s %s: %s", what, op.ID, op.Status, op.Error)
		}
		show.status(op.ID, op.Status)
		if ctx.Err() != nil {
			return op, fmt.Errorf("%s: operation %s still %s after %s (it goes on at the server)", what, op.ID, op.Status, timeout)
		}
		var next orchestrator.Operation
		if _, err := callOp(ctx, r, "get_operation_status", map[string]any{"operation_id": op.ID, "wait_seconds": pollWait}, &next); err != nil {
			if ctx.Err() != nil {
				continue // the timeout, said above
			}
			return op, fmt.Errorf("%s: %w", what, err)
		}
		op = next
	}
}

// progress shows an operation's progress: on a terminal a spinner that
// turns on its own between status calls, otherwise a line per change.
type progress struct {
	w     io.Writer
	what  string
	tty   bool
	lines bool
	start time.Time

	mu   sync.Mutex
	last string
	done chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, what string, lines bool) *progress {
	p := &progress{w: w, what: what, tty: isTerminal(w), lines: lines, start: time.Now(), done: make(chan struct{})}
	if p.tty {
		p.wg.Add(1)
		go p.spin()
	}
	return p
}

func (p *progress) status(id, status string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty && p.lines && status != p.last {
		fmt.Fprintf(p.w, "%s: operation %s %s\n", p.what, id, status)
	}
	p.last = status
}

func (p *progress) spin() {
	defer p.wg.Done()
	frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.done:
			fmt.Fprint(p.w, "\r\033[K")
			return
		case <-t.C:
		}
		p.mu.Lock()
		if p.last != "" {
			fmt.Fprintf(p.w, "\r\033[K%c %s (%s, %s)", frames[i%len(frames)], p.what, p.last, time.Since(p.start).Round(time.Second))
		}
		p.mu.Unlock()
	}
}

// stop ends the spinner and clears its line.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

// runOperation calls a long-running operation and waits for it.
func runOperation(ctx context.Context, e *env, r *remote, name string, in map[string]any, what string, timeout time.Duration, lines bool) (orchestrator.Operation, error) {
	var op orchestrator.Operation
	if _, err := callOp(ctx, r, name, in, &op); err != nil {
		return op, err
	}
	return waitOperation(ctx, e, r, op, what, timeout, lines)
}

// envInput puts the NAME=VALUE flags into in["env"].
func envInput(in map[string]any, kvs []string) error {
	if len(kvs) == 0 {
		return nil
	}
	vars := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return wire.Errorf(wire.CodeBadRequest, "--env %q: want NAME=VALUE", kv)
		}
		vars[k] = v
	}
	in["env"] = vars
	return nil
}
