package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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
// progress on stderr: a spinner on a terminal, a line per status change
// otherwise. A failed or cancelled operation is an error naming why.
func waitOperation(ctx context.Context, e *env, r *remote, op orchestrator.Operation, what string, timeout time.Duration) (orchestrator.Operation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tty := isTerminal(e.stderr)
	frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
	start, last := time.Now(), ""
	for i := 0; ; i++ {
		switch op.Status {
		case orchestrator.OpSucceeded:
			if tty {
				fmt.Fprintf(e.stderr, "\r\033[K")
			}
			return op, nil
		case orchestrator.OpFailed, orchestrator.OpCancelled:
			if tty {
				fmt.Fprintf(e.stderr, "\r\033[K")
			}
			return op, fmt.Errorf("%s: operation %s %s: %s", what, op.ID, op.Status, op.Error)
		}
		if tty {
			fmt.Fprintf(e.stderr, "\r\033[K%c %s (%s, %s)", frames[i%len(frames)], what, op.Status, time.Since(start).Round(time.Second))
		} else if op.Status != last {
			fmt.Fprintf(e.stderr, "%s: operation %s %s\n", what, op.ID, op.Status)
		}
		last = op.Status
		if ctx.Err() != nil {
			if tty {
				fmt.Fprintln(e.stderr)
			}
			return op, fmt.Errorf("%s: operation %s still %s after %s (it goes on at the server)", what, op.ID, op.Status, timeout)
		}
		id := op.ID
		var next orchestrator.Operation
		if _, err := callOp(ctx, r, "get_operation_status", map[string]any{"operation_id": id, "wait_seconds": pollWait}, &next); err != nil {
			if ctx.Err() != nil {
				continue // the timeout, said above
			}
			return op, fmt.Errorf("%s: %w", what, err)
		}
		op = next
	}
}

// runOperation calls a long-running operation and waits for it.
func runOperation(ctx context.Context, e *env, r *remote, name string, in map[string]any, what string, timeout time.Duration) (orchestrator.Operation, error) {
	var op orchestrator.Operation
	if _, err := callOp(ctx, r, name, in, &op); err != nil {
		return op, err
	}
	return waitOperation(ctx, e, r, op, what, timeout)
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
