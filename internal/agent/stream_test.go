package agent_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// The agent's streamed exec answers NDJSON events whose pieces, joined,
// are the one-shot answer; a refusal is a plain JSON error.
func TestBashStreamRoute(t *testing.T) {
	ta := startAgent(t)
	code, raw := ta.do(t, "POST", "/api/tools/bash/stream", map[string]any{"command": "echo out; echo err >&2; exit 4"}, nil)
	if code != http.StatusOK {
		t.Fatalf("got %d %s", code, raw)
	}
	var stdout, stderr strings.Builder
	end, err := wire.ReadEvents(bytes.NewReader(raw), 1<<20, func(ev wire.ExecEvent) error {
		if ev.Stream == wire.StreamStdout {
			stdout.WriteString(ev.Data)
		} else {
			stderr.WriteString(ev.Data)
		}
		return nil
	})
	if err != nil || *end.ExitCode != 4 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Fatalf("end %+v err %v stdout %q stderr %q", end, err, stdout.String(), stderr.String())
	}

	code, raw = ta.do(t, "POST", "/api/tools/bash/stream", map[string]any{"command": "true", "strip_output": true}, nil)
	if d := errorOf(t, raw); code != http.StatusBadRequest || !strings.Contains(d.Message, "strip_output") {
		t.Fatalf("strip_output: %d %s", code, raw)
	}
	code, raw = ta.do(t, "POST", "/api/tools/bash/stream", map[string]any{"command": " "}, nil)
	if d := errorOf(t, raw); code != http.StatusBadRequest || !strings.Contains(d.Message, "command") {
		t.Fatalf("blank command: %d %s", code, raw)
	}
}
