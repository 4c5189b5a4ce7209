package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// openStream starts a streamed command as token and returns the answer,
// whose body the caller reads event by event.
func (e *testEnv) openStream(t *testing.T, ctx context.Context, token, serverID string, body map[string]any) *http.Response {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", e.url+"/api/servers/"+serverID+"/exec/stream", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", wire.NDJSONType)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != wire.NDJSONType {
		t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// events reads a stream's lines, each at most what a capped stream's
// piece takes as JSON.
func events(resp *http.Response) *bufio.Scanner {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	return sc
}

// readAll reads the rest of a stream and returns stdout, stderr and the
// final event.
func readAll(t *testing.T, sc *bufio.Scanner, stdout, stderr *strings.Builder) wire.ExecEvent {
	t.Helper()
	for sc.Scan() {
		var ev wire.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Bytes(), err)
		}
		switch {
		case ev.Final():
			return ev
		case ev.Stream == wire.StreamStdout:
			stdout.WriteString(ev.Data)
		case ev.Stream == wire.StreamStderr:
			stderr.WriteString(ev.Data)
		}
	}
	t.Fatalf("stream ended without a final event: %v", sc.Err())
	return wire.ExecEvent{}
}

// A streamed command's first line arrives while it still runs: it waits
// for a file that the test creates only once it has read that line.
// Caps, the timeout and another user's refusal hold on the stream too.
func TestExecStream(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "alice-stream")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	t.Run("output arrives as written", func(t *testing.T) {
		resp := e.openStream(t, ctx, e.alice, srv, map[string]any{
			"command": "rm -f gate; echo first; while [ ! -e gate ]; do sleep 0.02; done; echo second; echo oops >&2; exit 3",
		})
		sc := events(resp)
		if !sc.Scan() {
			t.Fatalf("no first event: %v", sc.Err())
		}
		var first wire.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Stream != wire.StreamStdout || first.Data != "first\n" {
			t.Fatalf("first event %q (%v), want stdout first", sc.Bytes(), err)
		}
		// Only now may the command go on.
		var op orchestrator.Operation
		e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{"command": "touch gate", "wait_seconds": waitSeconds}, http.StatusOK, &op)
		if res := bashResult(t, op); res.ExitCode != 0 {
			t.Fatalf("touch gate: %+v", res)
		}
		var stdout, stderr strings.Builder
		end := readAll(t, sc, &stdout, &stderr)
		if stdout.String() != "second\n" || stderr.String() != "oops\n" || end.ExitCode == nil || *end.ExitCode != 3 || end.TimedOut || end.Truncated {
			t.Fatalf("stdout %q stderr %q end %+v", stdout.String(), stderr.String(), end)
		}
	})

	t.Run("caps keep head and tail", func(t *testing.T) {
		resp := e.openStream(t, ctx, e.alice, srv, map[string]any{
			"command": "printf 0123456789; head -c 3000000 /dev/zero | tr '\\0' y >&2", "max_output_bytes": 4,
		})
		var stdout, stderr strings.Builder
		sc := events(resp)
		end := readAll(t, sc, &stdout, &stderr)
		if stdout.String() != "01"+wire.OmittedMarker(6)+"89" || stderr.String() != "yy"+wire.OmittedMarker(2999996)+"yy" {
			t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
		}
		if !end.Truncated || end.StdoutTruncatedBytes != 6 || end.StderrTruncatedBytes != 2999996 || *end.ExitCode != 0 {
			t.Fatalf("end %+v", end)
		}
	})

	t.Run("timeout ends the stream", func(t *testing.T) {
		resp := e.openStream(t, ctx, e.alice, srv, map[string]any{
			"command": "echo started; sleep 1000", "command_timeout": 1, "graceful_termination_timeout": 0.5,
		})
		var stdout, stderr strings.Builder
		sc := events(resp)
		end := readAll(t, sc, &stdout, &stderr)
		if !end.TimedOut || *end.ExitCode != 124 || stdout.String() != "started\n" {
			t.Fatalf("stdout %q end %+v", stdout.String(), end)
		}
	})

	t.Run("berth stays bounded on 200 MB", func(t *testing.T) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp := e.openStream(t, ctx, e.alice, srv, map[string]any{"command": "echo start; head -c 200000000 /dev/zero | tr '\\0' z; echo; echo end"})
		var stdout, stderr strings.Builder
		end := readAll(t, events(resp), &stdout, &stderr)
		runtime.ReadMemStats(&after)
		if *end.ExitCode != 0 || !strings.HasPrefix(stdout.String(), "start\nzzz") || !strings.HasSuffix(stdout.String(), "zzz\nend\n") || stdout.Len() > 1<<20+100 {
			t.Fatalf("stdout %d bytes, end %+v", stdout.Len(), end)
		}
		// Everything this process (berth and the test) allocated.
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 50<<20 {
			t.Fatalf("allocated %d MB while streaming 200 MB", grown>>20)
		}
	})

	t.Run("a caller that goes away ends the command", func(t *testing.T) {
		callCtx, hangUp := context.WithCancel(ctx)
		defer hangUp()
		resp := e.openStream(t, callCtx, e.alice, srv, map[string]any{"command": "echo $$ > streamed.pid; echo running; sleep 1000"})
		sc := events(resp)
		if !sc.Scan() || !strings.Contains(sc.Text(), "running") {
			t.Fatalf("first event %q: %v", sc.Text(), sc.Err())
		}
		hangUp()
		for {
			var op orchestrator.Operation
			e.call(t, e.alice, "POST", "/api/servers/"+srv+"/bash", map[string]any{
				"command": "kill -0 $(cat streamed.pid) 2>/dev/null && echo alive || echo gone", "wait_seconds": waitSeconds,
			}, http.StatusOK, &op)
			if bashResult(t, op).Stdout == "gone\n" {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the command outlived its caller")
			}
		}
	})

	t.Run("audited as an exec", func(t *testing.T) {
		// Every stream so far, the one whose caller hung up included,
		// whose entry is written as berth notices the hang-up.
		for {
			var page orchestrator.AuditPage
			e.call(t, e.alice, "GET", "/api/audit?action=server.exec&resource_id="+srv, nil, http.StatusOK, &page)
			n := 0
			for _, en := range page.Entries {
				if en.Detail["kind"] == "stream" {
					n++
				}
			}
			if n == 5 {
				return
			}
			if n > 5 || ctx.Err() != nil {
				t.Fatalf("%d server.exec entries of kind stream, want 5: %+v", n, page.Entries)
			}
		}
	})

	t.Run("a stranger gets not_found", func(t *testing.T) {
		r := e.send(t, "POST", "/api/servers/"+srv+"/exec/stream", map[string]any{"command": "touch bob-was-here"}, bearer(e.bob))
		wantError(t, r, http.StatusNotFound)
	})
}
