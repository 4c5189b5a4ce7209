package orchestrator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// testScript is a small test runner: it runs four cases for real (one
// passes, one fails its check, one errors, one is skipped) and writes a
// JUnit report of what happened, as test frameworks do.
const testScript = `
set -u
mkdir -p reports
pass=0; fail=0; cases=""
if [ "$(echo hello | tr a-z A-Z)" = HELLO ]; then cases="$cases<testcase classname=\"t\" name=\"upper\"/>"
else cases="$cases<testcase classname=\"t\" name=\"upper\"><failure message=\"not upper\"/></testcase>"; fi
if [ "$(expr 2 + 2)" = 5 ]; then cases="$cases<testcase classname=\"t\" name=\"math\"/>"
else cases="$cases<testcase classname=\"t\" name=\"math\"><failure message=\"2+2 is not 5\"/></testcase>"; echo "FAILED t.math: 2+2 is not 5"; fi
if cat /nonexistent/fixture 2>/dev/null; then cases="$cases<testcase classname=\"t\" name=\"fixture\"/>"
else cases="$cases<testcase classname=\"t\" name=\"fixture\"><error message=\"fixture missing\"/></testcase>"; echo "ERROR t.fixture" >&2; fi
cases="$cases<testcase classname=\"t\" name=\"later\"><skipped/></testcase>"
printf '<?xml version="1.0"?><testsuite name="t" tests="4">%s</testsuite>\n' "$cases" > reports/junit.xml
exit 1
`

func (h running) runTests(t testing.TB, req orchestrator.RunTestsRequest) orchestrator.Operation {
	t.Helper()
	req.ServerID, req.WaitSeconds = h.server, deadline.Seconds()
	op, err := h.e.Svc.RunTests(context.Background(), h.alice, req)
	if err != nil {
		t.Fatalf("run tests: %v", err)
	}
	if op.Status != orchestrator.OpSucceeded && op.Status != orchestrator.OpFailed {
		t.Fatalf("test run %s is %s after the wait", op.ID, op.Status)
	}
	return op
}

func testResult(t testing.TB, op orchestrator.Operation) orchestrator.TestRunResult {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("test run %s is %s (%s: %s), want SUCCEEDED", op.ID, op.Status, op.ErrorCode, op.Error)
	}
	var res orchestrator.TestRunResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("test run result %s: %v", op.Result, err)
	}
	return res
}

// TestRunTests runs a real test command in a real sandbox and counts the
// JUnit report it writes; a run that writes none fails saying why, and a
// run that is not waited for is an operation to poll.
func TestRunTests(t *testing.T) {
	h := newRunning(t, orchestrator.Config{})
	ctx := context.Background()
	h.sh(t, "cat > run_tests.sh <<'EOF'\n"+testScript+"\nEOF")

	res := testResult(t, h.runTests(t, orchestrator.RunTestsRequest{Command: "bash run_tests.sh", JUnitPaths: []string{"reports/*.xml"}}))
	want := orchestrator.TestRunResult{Total: 4, Passed: 1, Failed: 1, Errors: 1, Skipped: 1, Reports: []string{"reports/junit.xml"}, ExitCode: 1}
	if res.Total != want.Total || res.Passed != want.Passed || res.Failed != want.Failed || res.Errors != want.Errors ||
		res.Skipped != want.Skipped || strings.Join(res.Reports, ",") != "reports/junit.xml" || res.ExitCode != 1 {
		t.Errorf("result %+v, want counts and report of %+v", res, want)
	}
	if !strings.Contains(res.StdoutTail, "FAILED t.math") || !strings.Contains(res.StderrTail, "ERROR t.fixture") {
		t.Errorf("log tails %q / %q lack the failures", res.StdoutTail, res.StderrTail)
	}

	// The report of the earlier run is stale: it does not count again.
	op := h.runTests(t, orchestrator.RunTestsRequest{Command: "echo no report; exit 3", JUnitPaths: []string{"reports/*.xml"}})
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeNotFound || !strings.Contains(op.Error, "exited with 3") {
		t.Errorf("run without a report: %s %s %q, want FAILED not_found naming the exit", op.Status, op.ErrorCode, op.Error)
	}

	// A long log keeps its end.
	res = testResult(t, h.runTests(t, orchestrator.RunTestsRequest{
		Command: "head -c 300000 /dev/zero | tr '\\0' x; echo; echo THE-END; bash run_tests.sh >/dev/null 2>&1; true",
	}))
	if len(res.StdoutTail) > 64<<10 || !strings.HasSuffix(res.StdoutTail, "THE-END\n") || res.StdoutTruncatedBytes < 200000 || res.Total != 4 {
		t.Errorf("long log: tail of %d bytes ending %q, %d left out, total %d", len(res.StdoutTail), res.StdoutTail[max(0, len(res.StdoutTail)-20):], res.StdoutTruncatedBytes, res.Total)
	}

	// Not waited for: an operation in progress, finished when polled.
	op, err := h.e.Svc.RunTests(ctx, h.alice, orchestrator.RunTestsRequest{ServerID: h.server, Command: "sleep 1; bash run_tests.sh"})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status == orchestrator.OpSucceeded || op.Status == orchestrator.OpFailed {
		t.Errorf("a run of a second and more finished before RunTests returned: %s", op.Status)
	}
	op, err = h.e.Svc.GetOperation(ctx, h.alice, op.ID, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if res := testResult(t, op); res.Failed != 1 {
		t.Errorf("polled run: %+v", res)
	}

	t.Run("refused", func(t *testing.T) {
		neg := -1.0
		for _, c := range []struct {
			req  orchestrator.RunTestsRequest
			word string
		}{
			{orchestrator.RunTestsRequest{JUnitPaths: []string{""}}, "junit_paths[0]"},
			{orchestrator.RunTestsRequest{JUnitPaths: make([]string, 65)}, "junit_paths"},
			{orchestrator.RunTestsRequest{CommandTimeout: &neg}, "command_timeout"},
			{orchestrator.RunTestsRequest{WaitSeconds: 301}, "wait_seconds"},
		} {
			c.req.ServerID = h.server
			_, err := h.e.Svc.RunTests(ctx, h.alice, c.req)
			wantCode(t, err, wire.CodeBadRequest, c.word)
		}
		bob := principal(t, h.e.Svc, "bob")
		_, err := h.e.Svc.RunTests(ctx, bob, orchestrator.RunTestsRequest{ServerID: h.server})
		wantCode(t, err, wire.CodeNotFound)
	})
}

// TestRunTestsHostile has a sandbox answer a test run with more output
// than it was asked for, which is kept truncated like any long output,
// and with nonsense counts, which fail the run as bad_gateway with
// nothing of it stored.
func TestRunTestsHostile(t *testing.T) {
	var answer atomic.Pointer[wire.RewardResult]
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/rewards/test", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, answer.Load())
	})
	h := newHostile(t, orchestrator.Config{}, mux)

	answer.Store(&wire.RewardResult{Total: 1, Bash: wire.BashResult{Stdout: strings.Repeat("x", 2<<20)}})
	op := h.runTests(t, orchestrator.RunTestsRequest{Command: "true"})
	var got orchestrator.TestRunResult
	if op.Status != orchestrator.OpSucceeded || json.Unmarshal(op.Result, &got) != nil {
		t.Fatalf("oversized answer: %s %s %q", op.Status, op.ErrorCode, op.Error)
	}
	if kept := 2<<20 - got.StdoutTruncatedBytes; kept > wire.DefaultMaxOutputBytes {
		t.Errorf("oversized answer: %d bytes of stdout counted as kept, want at most %d", kept, wire.DefaultMaxOutputBytes)
	}
	answer.Store(&wire.RewardResult{Total: 1, Failed: -5})
	op = h.runTests(t, orchestrator.RunTestsRequest{Command: "true"})
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeBadGateway || !strings.Contains(op.Error, "negative") {
		t.Errorf("negative counts: %s %s %q", op.Status, op.ErrorCode, op.Error)
	}
}
