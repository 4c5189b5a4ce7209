package orchestrator_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// agentBin is the berth-agent binary built once for every test.
var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// deadline bounds every wait of these tests: generous, for a busy machine.
const deadline = 90 * time.Second

// testConfig fills in what every test wants: orchtest's defaults, the
// whole deadline for a sandbox to come up, and logs when BERTH_TEST_LOG
// asks for them.
func testConfig(t testing.TB, cfg orchestrator.Config) orchestrator.Config {
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = deadline
	}
	if cfg.Logger == nil {
		cfg.Logger = orchtest.Logger(t)
	}
	return orchtest.Config(cfg)
}

// newService returns a running orchestrator on a fresh database. Tests
// that need replicas or a wrapped runtime build theirs from orchtest's
// parts instead.
func newService(t testing.TB, cfg orchestrator.Config) *orchtest.Env {
	t.Helper()
	return orchtest.New(t, agentBin, testConfig(t, cfg))
}

// principal makes a token for username (creating the user: the first
// user of a database is a global admin, later ones members of
// "default") and authenticates it, as a request would.
func principal(t testing.TB, svc *orchestrator.Service, username string, scopes ...string) rbac.Principal {
	t.Helper()
	ctx := context.Background()
	tok, _, err := svc.CreateToken(ctx, orchestrator.CreateTokenRequest{Username: username, Name: "test", Scopes: scopes})
	if err != nil {
		t.Fatalf("token for %s: %v", username, err)
	}
	p, err := svc.Authenticate(ctx, tok)
	if err != nil {
		t.Fatalf("authenticate %s: %v", username, err)
	}
	return p
}

// replica opens another orchestrator on the database at url, as one more
// replica of a deployment, named replicaID, on rt. Its Run is the
// caller's to start.
func replica(t testing.TB, url, replicaID string, rt runtime.Runtime) (*orchestrator.Service, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	svc, err := orchestrator.New(st, rt, testConfig(t, orchestrator.Config{ReplicaID: replicaID}))
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

func registerClient(t testing.TB, svc *orchestrator.Service, p rbac.Principal, name string) orchestrator.Client {
	t.Helper()
	c, err := svc.RegisterClient(context.Background(), p, orchestrator.RegisterClientRequest{Name: name})
	if err != nil {
		t.Fatalf("register client: %v", err)
	}
	return c
}

// startResult decodes a finished start_server operation, failing the test
// unless it succeeded.
func startResult(t testing.TB, op orchestrator.Operation) orchestrator.StartServerResult {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("start operation %s is %s (error %q), want SUCCEEDED with a result", op.ID, op.Status, op.Error)
	}
	var res orchestrator.StartServerResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("start result %s: %v", op.Result, err)
	}
	if res.ServerID == "" || res.Server.Status != orchestrator.ServerRunning {
		t.Fatalf("start result %s: want a running server", op.Result)
	}
	return res
}

// startServer starts a server and waits for it.
func startServer(t testing.TB, svc *orchestrator.Service, p rbac.Principal, req orchestrator.StartServerRequest) orchestrator.StartServerResult {
	t.Helper()
	req.WaitSeconds = deadline.Seconds()
	op, err := svc.StartServer(context.Background(), p, req)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	return startResult(t, op)
}

// bash runs a one-shot command through run_bash_command and decodes the
// agent's answer from the forwarded response.
func bash(t testing.TB, svc *orchestrator.Service, p rbac.Principal, serverID, command string, env map[string]string) wire.BashResult {
	t.Helper()
	op, err := svc.RunBashCommand(context.Background(), p, orchestrator.RunBashRequest{
		ServerID: serverID, Command: command, Env: env, WaitSeconds: deadline.Seconds(),
	})
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("run %q: operation is %s (error %q)", command, op.Status, op.Error)
	}
	var res wire.BashResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("run %q: result %s: %v", command, op.Result, err)
	}
	return res
}

// sessionExec runs a command in a persistent session and fails the test
// on error or a non-zero exit.
func sessionExec(t testing.TB, svc *orchestrator.Service, p rbac.Principal, serverID, session, command string) wire.BashResult {
	t.Helper()
	res, err := svc.SessionExec(context.Background(), p, serverID, session, wire.SessionExecRequest{Command: command})
	if err != nil {
		t.Fatalf("session %s: %q: %v", session, command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("session %s: %q exited %d: %s", session, command, res.ExitCode, res.Stderr)
	}
	return res
}

// waitFor checks cond until it holds or the deadline passes. Conditions
// are cheap reads; the short pause only keeps the loop from spinning.
func waitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxGone reports whether the runtime no longer holds the server's
// sandbox.
func sandboxGone(ctx context.Context, rt runtime.Runtime, id string) (bool, error) {
	st, err := rt.Status(ctx, id)
	return st.State == runtime.StateGone, err
}

// wantCode fails the test unless err carries the wire code and its
// message contains every one of words.
func wantCode(t testing.TB, err error, code string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	d := wire.DetailOf(err)
	if d.Code != code {
		t.Fatalf("got %s (%s), want %s", d.Code, d.Message, code)
	}
	for _, w := range words {
		if !strings.Contains(d.Message, w) {
			t.Fatalf("message %q does not name %q", d.Message, w)
		}
	}
}

// agentGet sends a GET to the server's agent through the forwarding path
// (which takes no exec slot) and decodes the JSON answer.
func agentGet(t testing.TB, svc *orchestrator.Service, p rbac.Principal, serverID, path string, out any) {
	t.Helper()
	ctx := context.Background()
	target, err := svc.ForwardTarget(ctx, p, "", serverID, path)
	if err != nil {
		t.Fatalf("forward target: %v", err)
	}
	resp, err := svc.Forwarder().Do(ctx, target, "GET", path, nil, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("GET %s: %q: %v", path, raw, err)
	}
}

func wireExec(command string) wire.SessionExecRequest {
	return wire.SessionExecRequest{Command: command}
}
