package orchestrator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/agent"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// pair is two replicas on one database and one runtime data directory,
// with a running server started by A. B's Run is not started: B's
// workers take over only what the test leaves them.
type pair struct {
	a, b   *orchestrator.Service
	st     *store.Store
	stopA  func()
	alice  rbac.Principal
	client string
	server string
}

func newPair(t *testing.T) pair {
	t.Helper()
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	// Both runtimes are made before any sandbox runs: each probes its
	// isolation with a sandbox in the shared data dir.
	rtA := orchtest.NewRuntime(t, agentBin, dir, nil)
	rtB := orchtest.NewRuntime(t, agentBin, dir, nil)
	a, st := replica(t, url, "replica-a", rtA)
	b, _ := replica(t, url, "replica-b", rtB)
	stopA := orchtest.Run(t, a)
	alice := principal(t, a, "alice")
	c := registerClient(t, a, alice, "takeover")
	srv := startServer(t, a, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"}).ServerID
	return pair{a: a, b: b, st: st, stopA: stopA, alice: alice, client: c.ID, server: srv}
}

// another is p on another server A starts.
func (p pair) another(t *testing.T) pair {
	t.Helper()
	p.server = startServer(t, p.a, p.alice, orchestrator.StartServerRequest{ClientID: p.client, ImageTag: "img"}).ServerID
	return p
}

// startOnA schedules command on A, inline (waiting for it, as a caller
// with wait_seconds does) or for A's workers, and returns its operation
// id once the command is running in the sandbox: it appends a line to
// mark first.
func (p pair) startOnA(t *testing.T, command, mark string, inline bool) string {
	t.Helper()
	req := orchestrator.RunBashRequest{ServerID: p.server, Command: "echo ran >> " + mark + "; " + command}
	ids := make(chan string, 1)
	if inline {
		// The caller waits for the command, which does not end before A
		// stops; it returns then, with the operation still in progress.
		req.WaitSeconds = deadline.Seconds()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() {
			op, err := p.a.RunBashCommand(ctx, p.alice, req)
			if err != nil {
				t.Errorf("run on A: %v", err)
			}
			ids <- op.ID
		}()
	} else {
		op, err := p.a.RunBashCommand(context.Background(), p.alice, req)
		if err != nil {
			t.Fatalf("run on A: %v", err)
		}
		ids <- op.ID
	}
	waitFor(t, mark+" to be written", func() (bool, error) {
		out := sessionExec(t, p.b, p.alice, p.server, "probe", "test -e "+mark+" && echo yes; true")
		return out.Stdout == "yes\n", nil
	})
	if inline {
		return "" // known once A stopped
	}
	return <-ids
}

func (p pair) operation(t *testing.T, id string) store.Operation {
	t.Helper()
	op, err := p.st.OperationByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// lines counts the lines of a workspace file.
func (p pair) lines(t *testing.T, name string) int {
	t.Helper()
	out := sessionExec(t, p.b, p.alice, p.server, "probe", "wc -l < "+name)
	n, err := strconv.Atoi(strings.TrimSpace(out.Stdout))
	if err != nil {
		t.Fatalf("lines of %s: %q", name, out.Stdout)
	}
	return n
}

// finished waits on B for operation id to end and returns it.
func (p pair) finished(t *testing.T, id string) orchestrator.Operation {
	t.Helper()
	op, err := p.b.GetOperation(context.Background(), p.alice, id, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if op.Status == orchestrator.OpScheduled || op.Status == orchestrator.OpInProgress {
		t.Fatalf("operation %s is still %s after %s", id, op.Status, deadline)
	}
	return op
}

func bashOf(t *testing.T, op orchestrator.Operation) wire.BashResult {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded {
		t.Fatalf("operation %s is %s (%s: %s), want SUCCEEDED", op.ID, op.Status, op.ErrorCode, op.Error)
	}
	var res wire.BashResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("result %s: %v", op.Result, err)
	}
	return res
}

// inProgress returns the ids of the operations still IN_PROGRESS on the
// server after A stopped, each after exactly one attempt.
func (p pair) inProgress(t *testing.T, want int) []string {
	t.Helper()
	rows, err := p.st.Pool.Query(context.Background(), `SELECT id::text, attempts FROM operations
		WHERE server_id = $1 AND type = 'run_bash_command' AND status = 'IN_PROGRESS' ORDER BY created_at`, p.server)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		var attempts int
		if err := rows.Scan(&id, &attempts); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 {
			t.Fatalf("operation %s made %d attempts before the takeover, want 1", id, attempts)
		}
		ids = append(ids, id)
	}
	if len(ids) != want {
		t.Fatalf("%d commands in progress after A stopped, want %d", len(ids), want)
	}
	return ids
}

// TestCommandSurvivesItsReplica: replica A runs two commands, one
// inline (its caller waiting) and one on a worker, and stops mid-way
// without recording either. The commands run on in the sandbox. Replica B
// takes both over once A's lease ran out: the one that finished while no
// replica watched, and the one still running, which B waits for. Each
// operation records the command's real output, and each command ran
// exactly once.
func TestCommandSurvivesItsReplica(t *testing.T) {
	p := newPair(t)
	p.startOnA(t, "while [ ! -e go-on-1 ]; do sleep 0.05; done; echo still-running-at-takeover", "runs-1", true)
	done := p.startOnA(t, "while [ ! -e go-on-2 ]; do sleep 0.05; done; echo finished-before-takeover; touch done-2", "runs-2", false)
	p.stopA()
	ids := p.inProgress(t, 2)
	running := ids[0]
	if running == done {
		running = ids[1]
	}

	// Command 2 ends while no replica watches it.
	sessionExec(t, p.b, p.alice, p.server, "probe", "touch go-on-2")
	waitFor(t, "command 2 to end", func() (bool, error) {
		out := sessionExec(t, p.b, p.alice, p.server, "probe", "test -e done-2 && echo yes; true")
		return out.Stdout == "yes\n", nil
	})

	orchtest.Run(t, p.b)
	// B holds command 1 while it still runs.
	waitFor(t, "B to take command 1 over", func() (bool, error) {
		return p.operation(t, running).Attempts == 2, nil
	})
	if op := p.operation(t, running); op.Status != orchestrator.OpInProgress {
		t.Fatalf("command 1 is %s (%s) after the takeover, before it ended; want IN_PROGRESS", op.Status, op.Error)
	}
	sessionExec(t, p.b, p.alice, p.server, "probe", "touch go-on-1")

	if res := bashOf(t, p.finished(t, running)); res.Stdout != "still-running-at-takeover\n" || res.ExitCode != 0 {
		t.Errorf("command running at the takeover recorded %+v", res)
	}
	if res := bashOf(t, p.finished(t, done)); res.Stdout != "finished-before-takeover\n" || res.ExitCode != 0 {
		t.Errorf("command finished before the takeover recorded %+v", res)
	}
	for _, mark := range []string{"runs-1", "runs-2"} {
		if n := p.lines(t, mark); n != 1 {
			t.Errorf("%s: the command ran %d times, want once", mark, n)
		}
	}
}

// TestTakeoverSaysWhatItCannotKnow: when the replica taking a command
// over finds an agent that restarted since the command was asked for,
// or cannot reach the agent at all (its sandbox on another host), the
// operation fails saying exactly that, and nothing runs the command a
// second time.
func TestTakeoverSaysWhatItCannotKnow(t *testing.T) {
	p := newPair(t)
	q := p.another(t)
	restarted := p.startOnA(t, "sleep 600", "runs", false)
	unreachable := q.startOnA(t, "sleep 600", "runs", false)
	p.stopA()
	p.inProgress(t, 1)
	q.inProgress(t, 1)

	// p's agent, restarted: a fresh agent behind the endpoint, which
	// knows nothing of the command the old one runs.
	ws := t.TempDir()
	fresh, err := agent.New(agent.Config{Workspace: ws, Token: orchestrator.AgentToken(orchtest.ServerKey, p.server)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fresh.Close() })
	(&orchtest.Env{Svc: p.b, Store: p.st}).StandIn(t, p.server, fresh.Handler())
	// q's agent, out of reach, as from a replica on another host.
	if _, err := p.st.SetServerRunning(context.Background(), q.server, store.Endpoint{Network: "unix", Address: t.TempDir() + "/gone.sock"}); err != nil {
		t.Fatal(err)
	}

	orchtest.Run(t, p.b)
	op := p.finished(t, restarted)
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeConflict ||
		!strings.Contains(op.Error, "stopped before it recorded") || !strings.Contains(op.Error, "agent restarted") || !strings.Contains(op.Error, "unknown") {
		t.Errorf("takeover on a restarted agent: %s %s %q, want FAILED conflict saying the agent restarted and the outcome is unknown", op.Status, op.ErrorCode, op.Error)
	}
	if _, err := os.Stat(ws + "/runs"); err == nil {
		t.Error("the restarted agent ran the command again")
	}
	op = p.finished(t, unreachable)
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeBadGateway ||
		!strings.Contains(op.Error, "could not learn it") || !strings.Contains(op.Error, "cannot reach server") || !strings.Contains(op.Error, "unknown") {
		t.Errorf("takeover with the agent out of reach: %s %s %q, want FAILED bad_gateway saying it cannot reach the server and the outcome is unknown", op.Status, op.ErrorCode, op.Error)
	}
}

// TestCancelStopsItsCommand: a command runs on its agent apart from any
// replica's request, so cancelling its operation must end it there: from
// the other replica while the one running it is alive, and after the
// replica running it died.
func TestCancelStopsItsCommand(t *testing.T) {
	p := newPair(t)
	q := p.another(t)
	cancelled := func(p pair, id string) {
		t.Helper()
		op, err := p.b.CancelOperation(context.Background(), p.alice, id)
		if err != nil || op.Status != orchestrator.OpCancelled {
			t.Fatalf("cancel: %+v %v", op, err)
		}
		waitFor(t, "the cancelled command to end", func() (bool, error) {
			out := sessionExec(t, p.b, p.alice, p.server, "probe", "kill -0 $(cat pid) 2>/dev/null && echo alive || echo gone")
			return out.Stdout == "gone\n", nil
		})
	}
	const command = "echo $$ > pid; sleep 600"
	cancelled(p, p.startOnA(t, command, "runs", false))
	id := q.startOnA(t, command, "runs", false)
	p.stopA()
	cancelled(q, id)
}

// oldAgent answers POST /api/tools/bash as an agent older than operation
// ids does: its request type has no operation fields, and unknown fields
// are refused.
func oldAgent() http.Handler {
	type oldBashRequest struct {
		Command                    string             `json:"command"`
		CommandTimeout             *float64           `json:"command_timeout,omitempty"`
		GracefulTerminationTimeout *float64           `json:"graceful_termination_timeout,omitempty"`
		MaxOutputBytes             wire.OptionalInt64 `json:"max_output_bytes,omitzero"`
		Cwd                        string             `json:"cwd,omitempty"`
		Env                        map[string]string  `json:"env,omitempty"`
		User                       string             `json:"user,omitempty"`
		StripOutput                bool               `json:"strip_output,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req oldBashRequest
		if err := wire.DecodeJSON(w, r, 1<<20, &req); err != nil {
			wire.WriteError(w, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, wire.BashResult{Stdout: "old agent\n"})
	})
}

// TestAgentOlderThanOperationIDs: a sandbox whose agent predates
// operation ids (started before berth was upgraded) still runs commands,
// as it did; a takeover there cannot know the outcome, and says why
// instead of running the command again.
func TestAgentOlderThanOperationIDs(t *testing.T) {
	r := newHostile(t, orchestrator.Config{}, oldAgent())
	if op := r.runBash(t, orchestrator.RunBashRequest{Command: "echo hi"}); op.Status != orchestrator.OpSucceeded || !strings.Contains(string(op.Result), "old agent") {
		t.Fatalf("a command on an old agent: %s %s %s", op.Status, op.Error, op.Result)
	}

	p := newPair(t)
	id := p.startOnA(t, "sleep 600", "runs", false)
	p.stopA()
	(&orchtest.Env{Svc: p.b, Store: p.st}).StandIn(t, p.server, oldAgent())
	orchtest.Run(t, p.b)
	op := p.finished(t, id)
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeConflict || !strings.Contains(op.Error, "agent is older") || !strings.Contains(op.Error, "unknown") {
		t.Errorf("takeover on an old agent: %s %s %q, want FAILED conflict saying the agent is older and the outcome unknown", op.Status, op.ErrorCode, op.Error)
	}
}
