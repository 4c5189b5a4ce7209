package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Test runs (the agent's rewards): a test command and the JUnit reports it
// writes, counted by the agent. A suite can run for many minutes, so a run
// is an operation like run_bash_command: the caller waits up to
// wait_seconds and polls after, any replica answers the poll, and a run
// whose replica died is taken over as a command is (takeover.go): the
// survivor collects the one run's outcome from the agent.

const opRunTests = "run_tests"

// Bounds of a test run's request and result.
const (
	maxJUnitPaths = 64
	maxGlobBytes  = 1024
	// testLogTail is how much of the end of each of the command's
	// streams a result keeps: failures are reported last.
	testLogTail = 64 << 10
)

// RunTestsRequest runs a server's test command and counts its JUnit
// reports.
type RunTestsRequest struct {
	ClientID       string   `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	ServerID       string   `json:"server_id" jsonschema:"the server to run the tests in"`
	Command        string   `json:"command,omitempty" jsonschema:"bash command that runs the tests in the workspace, e.g. pytest --junitxml=report.xml (default: the agent's configured test command)"`
	JUnitPaths     []string `json:"junit_paths,omitempty" jsonschema:"workspace-relative glob patterns (** matches directories) of the JUnit XML reports the command writes; only reports written during this run count (default: any *.xml with a testsuite or testsuites root)"`
	CommandTimeout *float64 `json:"command_timeout,omitempty" jsonschema:"seconds before the test command is terminated (default 600)"`
	WaitSeconds    float64  `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) and return the finished operation inline; poll get_operation after"`
}

// TestRunResult is a finished test run: the operation's result.
type TestRunResult struct {
	Total                int      `json:"total" jsonschema:"test cases in the counted reports"`
	Passed               int      `json:"passed" jsonschema:"test cases that passed"`
	Failed               int      `json:"failed" jsonschema:"test cases that failed an assertion"`
	Errors               int      `json:"errors" jsonschema:"test cases that ended in an error"`
	Skipped              int      `json:"skipped" jsonschema:"test cases that were skipped"`
	Reports              []string `json:"reports" jsonschema:"workspace-relative JUnit reports written during the run and counted"`
	ExitCode             int      `json:"exit_code" jsonschema:"the test command's exit status"`
	TimedOut             bool     `json:"timed_out" jsonschema:"the test command ran past command_timeout and was terminated"`
	DurationMS           int64    `json:"duration_ms" jsonschema:"how long the test command ran, in milliseconds"`
	StdoutTail           string   `json:"stdout_tail" jsonschema:"the end of the test command's standard output (at most 64 KiB)"`
	StderrTail           string   `json:"stderr_tail" jsonschema:"the end of the test command's standard error (at most 64 KiB)"`
	StdoutTruncatedBytes int64    `json:"stdout_truncated_bytes" jsonschema:"bytes of standard output left out of stdout_tail"`
	StderrTruncatedBytes int64    `json:"stderr_truncated_bytes" jsonschema:"bytes of standard error left out of stderr_tail"`
}

// check refuses what the agent would, naming the field.
func (r RunTestsRequest) check() error {
	if err := checkWait(r.WaitSeconds); err != nil {
		return err
	}
	if _, err := wire.Seconds("command_timeout", r.CommandTimeout, wire.DefaultCommandTimeoutSeconds, false); err != nil {
		return err
	}
	if len(r.JUnitPaths) > maxJUnitPaths {
		return wire.Errorf(wire.CodeBadRequest, "junit_paths: want at most %d patterns, got %d", maxJUnitPaths, len(r.JUnitPaths))
	}
	for i, g := range r.JUnitPaths {
		switch {
		case strings.TrimSpace(g) == "":
			return wire.Errorf(wire.CodeBadRequest, "junit_paths[%d]: want a glob pattern, got an empty string", i)
		case len(g) > maxGlobBytes:
			return wire.Errorf(wire.CodeBadRequest, "junit_paths[%d]: want at most %d bytes, got %d", i, maxGlobBytes, len(g))
		case strings.ContainsRune(g, 0):
			return wire.Errorf(wire.CodeBadRequest, "junit_paths[%d]: want a glob pattern, got one with a NUL byte", i)
		}
	}
	return nil
}

// RunTests schedules a test run on a server: the operation's result is a
// TestRunResult. A run with no usable JUnit report fails with the agent's
// explanation (not_found: which patterns, how the command exited).
func (s *Service) RunTests(ctx context.Context, p rbac.Principal, req RunTestsRequest) (Operation, error) {
	if err := req.check(); err != nil {
		return Operation{}, err
	}
	srv, err := s.server(ctx, p, rbac.ActionServerExec, req.ServerID, req.ClientID)
	if err != nil {
		return Operation{}, err
	}
	if err := s.checkExecutable(ctx, srv); err != nil {
		return Operation{}, err
	}
	params, err := json.Marshal(wire.RewardRequest{Command: req.Command, JUnitPaths: req.JUnitPaths, CommandTimeout: req.CommandTimeout})
	if err != nil {
		return Operation{}, fmt.Errorf("encode test run: %w", err)
	}
	return s.scheduleExec(ctx, p, srv, opRunTests, params, nil, req.WaitSeconds)
}

func (s *Service) execRunTests(ctx context.Context, op store.Operation) (any, error) {
	var req wire.RewardRequest
	if err := json.Unmarshal(op.Params, &req); err != nil {
		return nil, fmt.Errorf("operation %s: bad params: %w", op.ID, err)
	}
	srv, t, err := s.opTarget(ctx, op)
	if err != nil {
		return nil, takenOver(op, err)
	}
	release, err := s.commandSlot(ctx, op)
	if err != nil {
		return nil, err
	}
	defer release()
	// The agent keeps its default per stream; the reports' names come on
	// top of the two streams.
	limit := int64(wire.DefaultMaxOutputBytes)
	call := s.bashCall("the test run", wire.BashRequest{CommandTimeout: req.CommandTimeout})
	resp, raw, err := s.askCommand(ctx, t, op, call, "api/rewards/test", &req, &req.Operation, outputAnswerLimit(limit)+s.contentAnswerLimit())
	s.touch(ctx, srv)
	run := agentRun{target: t}
	if err != nil {
		return run, takenOver(op, fmt.Errorf("test run on server %s: %w", srv.ID, err))
	}
	defer resp.Body.Close()
	var res wire.RewardResult
	if err := decodeAnswer(srv.ID, raw, &res); err != nil {
		return run, err
	}
	wire.FitOutput(&res.Bash, limit)
	run.result, err = testRunResult(srv.ID, res)
	return run, err
}

// testRunResult keeps what a caller needs of an agent's answer: counts
// that make sense, and the ends of the logs.
func testRunResult(serverID string, res wire.RewardResult) (TestRunResult, error) {
	counts := []int{res.Total, res.Passed, res.Failed, res.Errors, res.Skipped}
	for _, n := range counts {
		if n < 0 {
			return TestRunResult{}, wire.Errorf(wire.CodeBadGateway, "server %s answered negative test counts %v", serverID, counts)
		}
	}
	if res.Reports == nil {
		res.Reports = []string{}
	}
	b := res.Bash
	out := TestRunResult{
		Total: res.Total, Passed: res.Passed, Failed: res.Failed, Errors: res.Errors, Skipped: res.Skipped,
		Reports: res.Reports, ExitCode: b.ExitCode, TimedOut: b.TimedOut, DurationMS: b.DurationMS,
		StdoutTruncatedBytes: b.StdoutTruncatedBytes, StderrTruncatedBytes: b.StderrTruncatedBytes,
	}
	var cut int64
	out.StdoutTail, cut = tail(b.Stdout, testLogTail)
	out.StdoutTruncatedBytes += cut
	out.StderrTail, cut = tail(b.Stderr, testLogTail)
	out.StderrTruncatedBytes += cut
	return out, nil
}

// tail returns the last n bytes of s at most, starting on a character
// boundary, and how many bytes it left out.
func tail(s string, n int) (string, int64) {
	if len(s) <= n {
		return s, 0
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:], int64(start)
}
