package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// opDeadline bounds every wait of the operation tests: generous, for a
// busy machine.
const opDeadline = 60 * time.Second

// waitFile waits until the workspace file name exists.
func waitFile(t *testing.T, ta *testAgent, name string) {
	t.Helper()
	end := time.Now().Add(opDeadline)
	for {
		if _, err := os.Stat(filepath.Join(ta.workspace, name)); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s was not written within %s", name, opDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lines(t *testing.T, ta *testAgent, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ta.workspace, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// post sends body to path under ctx and returns the status and body;
// an error when ctx ended first.
func (ta *testAgent) post(ctx context.Context, path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", ta.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// TestOperationCommandOutlivesItsCaller: a command berth runs for an
// operation goes on when the request that started it goes away (a replica
// dying closes its connection), and a request repeating the operation id
// (the replica taking it over) gets the real outcome of that one run,
// while it runs and after it ended, without running it again.
func TestOperationCommandOutlivesItsCaller(t *testing.T) {
	ta := startAgent(t)
	const id = "0b1e6a52-0000-4000-8000-000000000001"
	cmd := "echo ran >> runs; while [ ! -e go-on ]; do sleep 0.02; done; echo finished"
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, _, err := ta.post(ctx, "/api/tools/bash", map[string]any{"command": cmd, "operation_id": id})
		gone <- err
	}()
	waitFile(t, ta, "runs")
	cancel() // the replica dies
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request got an answer")
	}

	// The survivor asks while the command still runs: it waits for it.
	answered := make(chan []byte, 1)
	go func() {
		code, raw, err := ta.post(context.Background(), "/api/tools/bash", map[string]any{"command": cmd, "operation_id": id, "operation_age_ms": 1})
		if err != nil || code != 200 {
			t.Errorf("takeover: %d %s %v", code, raw, err)
		}
		answered <- raw
	}()
	if err := os.WriteFile(filepath.Join(ta.workspace, "go-on"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var res wire.BashResult
	select {
	case raw := <-answered:
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("takeover answer %s: %v", raw, err)
		}
	case <-time.After(opDeadline):
		t.Fatal("the takeover got no answer")
	}
	if res.Stdout != "finished\n" || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("takeover answer %+v, want the command's own: finished, exit 0", res)
	}
	// Asked again once it ended: the kept answer, at once.
	var again wire.BashResult
	if code, raw := ta.do(t, "POST", "/api/tools/bash", map[string]any{"command": cmd, "operation_id": id, "operation_age_ms": 1}, &again); code != 200 || !reflect.DeepEqual(again, res) {
		t.Fatalf("asked after the end: %d %s, want %+v", code, raw, res)
	}
	if n := lines(t, ta, "runs"); n != 1 {
		t.Fatalf("the command ran %d times, want once", n)
	}
	// Released, the answer is gone; the release itself is idempotent.
	for range 2 {
		if code, raw := ta.do(t, "DELETE", "/api/operations/"+id, nil, nil); code != http.StatusNoContent {
			t.Fatalf("release: %d %s", code, raw)
		}
	}
}

// TestOperationOfAnotherAgentLife: an agent that does not know an
// operation id and started after berth recorded the operation (it
// restarted, and lost its table) cannot know whether it ran the command:
// it says so and does not run it. One that has been up all along and
// never saw the id runs it, once.
func TestOperationOfAnotherAgentLife(t *testing.T) {
	ta := startAgent(t)
	code, raw := ta.do(t, "POST", "/api/tools/bash", map[string]any{
		"command": "echo ran >> runs", "operation_id": "op-restarted", "operation_age_ms": time.Hour.Milliseconds(),
	}, nil)
	if code != http.StatusConflict {
		t.Fatalf("takeover on a restarted agent: %d %s, want 409", code, raw)
	}
	if e := errorOf(t, raw); e.Code != wire.CodeConflict || !strings.Contains(e.Message, "agent restarted") || !strings.Contains(e.Message, "unknown") {
		t.Fatalf("takeover on a restarted agent: %+v, want it to say the agent restarted and the outcome is unknown", e)
	}
	if _, err := os.Stat(filepath.Join(ta.workspace, "runs")); err == nil {
		t.Fatal("the command ran on an agent that could not know whether it had")
	}
	var res wire.BashResult
	if code, raw := ta.do(t, "POST", "/api/tools/bash", map[string]any{"command": "echo ran >> runs; echo once", "operation_id": "op-new", "operation_age_ms": 1}, &res); code != 200 || res.Stdout != "once\n" {
		t.Fatalf("takeover of an operation the agent never saw: %d %s", code, raw)
	}
	if n := lines(t, ta, "runs"); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}
}

// TestOperationReleaseStopsItsCommand: berth releasing a running
// operation (it was cancelled) ends its command, and a late request for
// it (a replica's, still in flight) does not run it again; a release
// that comes before the command keeps it from ever running.
func TestOperationReleaseStopsItsCommand(t *testing.T) {
	ta := startAgent(t)
	const id = "op-cancelled"
	body := map[string]any{"command": "echo ran >> runs; sleep 600", "operation_id": id}
	answered := make(chan wire.BashResult, 1)
	go func() {
		var res wire.BashResult
		code, raw, err := ta.post(context.Background(), "/api/tools/bash", body)
		if err != nil || code != 200 || json.Unmarshal(raw, &res) != nil {
			t.Errorf("running request: %d %s %v", code, raw, err)
		}
		answered <- res
	}()
	waitFile(t, ta, "runs")
	if code, raw := ta.do(t, "DELETE", "/api/operations/"+id, nil, nil); code != http.StatusNoContent {
		t.Fatalf("release: %d %s", code, raw)
	}
	select {
	case res := <-answered:
		if !res.TimedOut {
			t.Fatalf("the released command answered %+v, want it terminated", res)
		}
	case <-time.After(opDeadline):
		t.Fatal("releasing the operation did not end its command")
	}
	code, raw := ta.do(t, "POST", "/api/tools/bash", body, nil)
	if code != http.StatusConflict || !strings.Contains(errorOf(t, raw).Message, "cancelled") {
		t.Fatalf("a late request for the released operation: %d %s, want 409 cancelled", code, raw)
	}
	ta.do(t, "DELETE", "/api/operations/op-early", nil, nil)
	code, raw = ta.do(t, "POST", "/api/tools/bash", map[string]any{"command": "echo ran >> runs", "operation_id": "op-early"}, nil)
	if code != http.StatusConflict || !strings.Contains(errorOf(t, raw).Message, "cancelled before") {
		t.Fatalf("a request for an operation released before it came: %d %s, want 409", code, raw)
	}
	if n := lines(t, ta, "runs"); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}
}

// TestOperationTestRunOutlivesItsCaller: a test run (POST
// /api/rewards/test) for an operation survives its caller as a command
// does, and its answer, a refusal included, is the one run's.
func TestOperationTestRunOutlivesItsCaller(t *testing.T) {
	ta := startAgent(t)
	const id = "op-tests"
	body := map[string]any{"command": "echo ran >> runs; while [ ! -e go-on ]; do sleep 0.02; done", "operation_id": id}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		ta.post(ctx, "/api/rewards/test", body)
	}()
	waitFile(t, ta, "runs")
	cancel()
	<-gone
	if err := os.WriteFile(filepath.Join(ta.workspace, "go-on"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	body["operation_age_ms"] = 1
	code, raw := ta.do(t, "POST", "/api/rewards/test", body, nil)
	if code != http.StatusNotFound || !strings.Contains(errorOf(t, raw).Message, "no JUnit report") {
		t.Fatalf("takeover of the test run: %d %s, want the run's own 404 (no report)", code, raw)
	}
	if n := lines(t, ta, "runs"); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}
}

// TestOperationIDChecked: an operation id is checked as any field is.
func TestOperationIDChecked(t *testing.T) {
	ta := startAgent(t)
	for _, body := range []map[string]any{
		{"command": "true", "operation_id": "../x"},
		{"command": "true", "operation_age_ms": 5},
		{"command": "true", "operation_id": "a", "operation_age_ms": -1},
	} {
		if code, raw := ta.do(t, "POST", "/api/tools/bash", body, nil); code != http.StatusBadRequest || !strings.Contains(string(raw), "operation_") {
			t.Errorf("%v: %d %s, want 400 naming the field", body, code, raw)
		}
	}
}
