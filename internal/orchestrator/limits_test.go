package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// hundredMB prints 100 MB on stdout (and a little on stderr).
const hundredMB = `head -c 100000000 /dev/zero | tr '\0' x; echo done >&2`

// TestUncappedOutputIsCapped: a real sandbox printing 100 MB with
// max_output_bytes null (IdeGYM's "unlimited") gets the server's cap, on
// run_bash_command and in a session, and the stored result stays small.
func TestUncappedOutputIsCapped(t *testing.T) {
	r := newRunning(t, orchestrator.Config{})
	e, alice, srv := r.e, r.alice, r.server
	ctx := context.Background()
	const limit = orchestrator.DefaultMaxOutputBytes

	op, err := e.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{
		ServerID: srv, Command: hundredMB, MaxOutputBytes: wire.Null(), WaitSeconds: deadline.Seconds(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("operation %s is %s (%s %s)", op.ID, op.Status, op.ErrorCode, op.Error)
	}
	var res wire.BashResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatal(err)
	}
	wantCapped(t, "run_bash_command", res, limit)
	var stored int
	if err := e.Store.Pool.QueryRow(ctx, `SELECT octet_length(result) FROM operations WHERE id = $1`, op.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > limit+limit/4 {
		t.Errorf("the stored result is %d bytes, want about the %d-byte cap", stored, limit)
	}

	// Binary output takes six bytes of JSON a byte (\u0000): it is kept to
	// twice the cap in JSON text, so it costs what text does.
	res = bashWith(t, e.Svc, alice, srv, `head -c 100000000 /dev/zero; head -c 100000000 /dev/zero >&2`, "null")
	for name, st := range map[string]struct {
		s       string
		omitted int64
	}{"stdout": {res.Stdout, res.StdoutTruncatedBytes}, "stderr": {res.Stderr, res.StderrTruncatedBytes}} {
		b, _ := json.Marshal(st.s)
		kept := int64(len(st.s) - len(wire.OmittedMarker(st.omitted)))
		if int64(len(b)) > 2*limit+128 || kept < limit/4 || kept+st.omitted != 100_000_000 {
			t.Errorf("binary %s: %d bytes of JSON, %d kept and %d omitted", name, len(b), kept, st.omitted)
		}
	}
	var binaryStored int
	if err := e.Store.Pool.QueryRow(ctx, `SELECT octet_length(result) FROM operations WHERE server_id = $1 ORDER BY created_at DESC LIMIT 1`, srv).Scan(&binaryStored); err != nil {
		t.Fatal(err)
	}
	if binaryStored > 5*limit {
		t.Errorf("the stored result of binary output is %d bytes, want at most %d", binaryStored, 5*limit)
	}

	res, err = e.Svc.SessionExec(ctx, alice, srv, "s", wire.SessionExecRequest{Command: hundredMB, MaxOutputBytes: wire.Null()})
	if err != nil {
		t.Fatal(err)
	}
	wantCapped(t, "session exec", res, limit)

	// A limit above the cap is the cap too; one below it is kept.
	res = bashWith(t, e.Svc, alice, srv, hundredMB, fmt.Sprint(limit*4))
	wantCapped(t, "above the cap", res, limit)
	if res = bashWith(t, e.Svc, alice, srv, hundredMB, "1000"); len(res.Stdout) > 1000+64 {
		t.Errorf("max_output_bytes 1000 kept %d bytes", len(res.Stdout))
	}
}

// wantCapped fails unless res kept the head and tail of 100 MB within
// limit bytes and says how much it dropped.
func wantCapped(t *testing.T, where string, res wire.BashResult, limit int64) {
	t.Helper()
	if n := int64(len(res.Stdout)); n > limit+64 || n < limit {
		t.Errorf("%s: kept %d bytes of stdout, want the %d-byte cap", where, n, limit)
	}
	if res.StdoutTruncatedBytes != 100_000_000-limit || !strings.Contains(res.Stdout, "bytes omitted") {
		t.Errorf("%s: %d bytes reported dropped, want %d and a marker", where, res.StdoutTruncatedBytes, 100_000_000-limit)
	}
	if res.Stderr != "done\n" || res.ExitCode != 0 {
		t.Errorf("%s: stderr %q, exit %d", where, res.Stderr, res.ExitCode)
	}
}

// bashWith runs command with a raw max_output_bytes and returns the
// agent's result.
func bashWith(t *testing.T, svc *orchestrator.Service, p rbac.Principal, srv, command, maxOutput string) wire.BashResult {
	t.Helper()
	var limit wire.OptionalInt64
	if err := json.Unmarshal([]byte(maxOutput), &limit); err != nil {
		t.Fatal(err)
	}
	op, err := svc.RunBashCommand(context.Background(), p, orchestrator.RunBashRequest{
		ServerID: srv, Command: command, MaxOutputBytes: limit, WaitSeconds: deadline.Seconds(),
	})
	if err != nil || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("run with max_output_bytes %s: %+v %v", maxOutput, op, err)
	}
	var res wire.BashResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// flood stands in for an agent that answers every call with far more
// than berth asked for: 400 MB, an endless body, or huge headers. It
// records how much each answer got out before berth stopped reading.
type flood struct {
	mu    sync.Mutex
	mode  string
	wrote []int64
}

func (f *flood) set(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.wrote = mode, nil
}

func (f *flood) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	if mode == "headers" {
		for i := range 64 {
			w.Header().Set(fmt.Sprintf("X-Flood-%d", i), strings.Repeat("h", 4<<10))
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	size := int64(-1)
	if mode == "400MB" {
		size = 400 << 20
		w.Header().Set("Content-Length", fmt.Sprint(size))
	}
	w.Header().Set("Content-Type", "application/json")
	if mode == "sse" && r.URL.Path == "/mcp" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	// A value that never ends keeps a JSON decoder buffering.
	chunk := []byte(strings.Repeat("x", 64<<10))
	n, _ := w.Write([]byte(`{"stdout":"`))
	total := int64(n)
	for size < 0 || total < size {
		b := chunk
		if size >= 0 {
			b = b[:min(int64(len(b)), size-total)]
		}
		n, err := w.Write(b)
		total += int64(n)
		if err != nil {
			break
		}
	}
	f.mu.Lock()
	f.wrote = append(f.wrote, total)
	f.mu.Unlock()
}

// most returns the most one answer got out, once an answer ended.
func (f *flood) most(t *testing.T) int64 {
	t.Helper()
	var most int64
	waitFor(t, "the stand-in to see berth stop reading", func() (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, n := range f.wrote {
			most = max(most, n)
		}
		return len(f.wrote) > 0, nil
	})
	return most
}

// TestFloodingAgentIsBounded has a sandbox answer every kind of call berth
// reads whole (one-shot and session commands, file reads and listings,
// forward_request, the MCP bridge) with 400 MB, an endless body and huge
// headers: each ends in a bad_gateway error naming the limit, after berth
// read no more than that limit.
func TestFloodingAgentIsBounded(t *testing.T) {
	const cap = 64 << 10
	f := &flood{}
	h := newHostile(t, orchestrator.Config{MaxOutputBytes: cap}, f)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	svc, p, srv := h.e.Svc, h.alice, h.server
	calls := map[string]func() error{
		"run_bash_command": func() error {
			op := h.runBash(t, orchestrator.RunBashRequest{MaxOutputBytes: wire.Null()})
			if op.Status != orchestrator.OpFailed {
				return nil
			}
			return wire.Errorf(op.ErrorCode, "%s", op.Error)
		},
		"session exec": func() error {
			_, err := svc.SessionExec(ctx, p, srv, "s", wire.SessionExecRequest{Command: "true", MaxOutputBytes: wire.Null()})
			return err
		},
		"read_file": func() error {
			_, err := svc.ReadFile(ctx, p, orchestrator.ReadFileRequest{ServerID: srv, Path: "f"})
			return err
		},
		"list_files": func() error {
			_, err := svc.ListFiles(ctx, p, orchestrator.ListFilesRequest{ServerID: srv})
			return err
		},
		"forward_request": func() error {
			_, err := svc.ForwardRequest(ctx, p, orchestrator.ForwardRequest{ServerID: srv, Path: "api/anything"})
			return err
		},
		"call_server_mcp_tool": func() error {
			_, err := svc.CallServerTool(ctx, p, orchestrator.CallServerToolRequest{ServerID: srv, ToolName: "echo"})
			return err
		},
		"list_server_mcp_tools": func() error {
			_, err := svc.ListServerTools(ctx, p, orchestrator.ServerToolsRequest{ServerID: srv})
			return err
		},
	}
	for _, mode := range []string{"400MB", "endless", "sse", "headers"} {
		for name, call := range calls {
			t.Run(mode+"/"+name, func(t *testing.T) {
				f.set(mode)
				err := call()
				word := "more than"
				if mode == "headers" {
					word = "65536"
				}
				wantCode(t, err, wire.CodeBadGateway, word, "bytes")
				if mode == "headers" {
					return
				}
				// Berth's limits for these calls are a few times the
				// cap; what the stand-in got out beyond them sat in
				// socket buffers.
				if most := f.most(t); most > 4<<20 {
					t.Errorf("the stand-in wrote %d bytes before berth stopped reading", most)
				}
			})
		}
	}
}

// TestBinaryOutputIsTruncated: a real sandbox printing random bytes past
// the limit (invalid UTF-8, which comes back from JSON as three bytes of
// U+FFFD each) gets its output back truncated, head and tail within the
// limit, with truncated set and the bytes left out counted, on both
// streams and both exec paths; it used to fail the whole command as
// bad_gateway ("answered 4211648 bytes of stdout, more than ...").
func TestBinaryOutputIsTruncated(t *testing.T) {
	r := newRunning(t, orchestrator.Config{})
	e, alice, srv := r.e, r.alice, r.server
	ctx := context.Background()
	const random = `head -c 6000000 /dev/urandom; head -c 6000000 /dev/urandom >&2`
	check := func(where string, res wire.BashResult, limit int64) {
		t.Helper()
		if !res.Truncated {
			t.Errorf("%s: truncated is not set", where)
		}
		for name, st := range map[string]struct {
			s       string
			omitted int64
		}{"stdout": {res.Stdout, res.StdoutTruncatedBytes}, "stderr": {res.Stderr, res.StderrTruncatedBytes}} {
			kept := int64(len(st.s) - len(wire.OmittedMarker(st.omitted)))
			if kept > limit || kept < limit/8 || !strings.Contains(st.s, wire.OmittedMarker(st.omitted)) {
				t.Errorf("%s %s: kept %d bytes around the marker, want the head and tail of at most %d", where, name, kept, limit)
			}
			if st.omitted < 6_000_000-limit || st.omitted >= 6_000_000 {
				t.Errorf("%s %s: %d bytes counted as left out of 6000000 with a limit of %d", where, name, st.omitted, limit)
			}
		}
	}
	// The server's cap (max_output_bytes null) and wire's default.
	check("run_bash_command, the cap", bashWith(t, e.Svc, alice, srv, random, "null"), orchestrator.DefaultMaxOutputBytes)
	check("run_bash_command, the default", bashWith(t, e.Svc, alice, srv, random, "1048576"), wire.DefaultMaxOutputBytes)
	res, err := e.Svc.SessionExec(ctx, alice, srv, "s", wire.SessionExecRequest{Command: random, MaxOutputBytes: wire.Null()})
	if err != nil {
		t.Fatalf("session exec: %v", err)
	}
	check("session exec", res, orchestrator.DefaultMaxOutputBytes)

	// Output within its limit is whole and says nothing was left out.
	if res := bashWith(t, e.Svc, alice, srv, `printf 'ok\n'`, "null"); res.Truncated || res.Stdout != "ok\n" {
		t.Errorf("short output: %+v", res)
	}
}
