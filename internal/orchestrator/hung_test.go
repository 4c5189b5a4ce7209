package orchestrator_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// stopAgent is what root in a sandbox runs to stop its own agent: it
// finds berth-agent among the sandbox's processes and sends it SIGSTOP.
// The agent then accepts connections (the kernel does) and answers none,
// the call that ran this command included.
const stopAgent = `for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "berth-agent --listen"*) kill -STOP ${p#/proc/};; esac
done`

// takeSocket is what root in a sandbox runs to answer in its agent's
// place and answer nothing: a process of its own takes the agent's
// listening socket (pidfd_getfd, fd 3 of the agent), stops the agent so
// that it alone accepts, and then accepts every connection, reads the
// request and never answers. The agent is stopped only once the socket
// is taken, so a stopped agent shows the theft worked. The command waits
// until the thief has left its process group (which the agent kills when
// the command ends); its own call may or may not be answered before the
// agent stops.
const takeSocket = `agent=$(for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "berth-agent --listen"*) echo ${p#/proc/};; esac
done)
setsid python3 -c '
import ctypes, os, signal, socket, sys
open("/tmp/thief-detached", "w").close()
agent = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(438, os.pidfd_open(agent), 3, 0)  # pidfd_getfd
if fd < 0:
    sys.exit("pidfd_getfd: " + os.strerror(ctypes.get_errno()))
ln = socket.socket(fileno=fd)
os.kill(agent, signal.SIGSTOP)
held = []
while True:
    c, _ = ln.accept()
    c.recv(65536)
    held.append(c)
' "$agent" </dev/null >/dev/null 2>&1 &
while [ ! -e /tmp/thief-detached ]; do sleep 0.01; done`

// hang is a way for a sandbox to hang its agent; mustTimeOut says the
// call that ran it never gets its answer.
type hang struct {
	name, command string
	mustTimeOut   bool
}

var hangs = []hang{{"SIGSTOP", stopAgent, true}, {"socket taken", takeSocket, false}}

// hungConfig sets every deadline of a call to an agent short, so that the
// tests of a hung agent wait seconds, not minutes; the health checks fail
// a server after unhealthyAfter.
func hungConfig(unhealthyAfter time.Duration) orchestrator.Config {
	return orchestrator.Config{
		AgentCallTimeout: 2 * time.Second, AgentCommandMargin: 2 * time.Second,
		AgentMCPTimeout: 2 * time.Second, AgentIdleTimeout: 2 * time.Second,
		HealthCheckTimeout: 2 * time.Second, UnhealthyAfter: unhealthyAfter,
	}
}

// hangItsAgent has the server hang its own agent (through
// run_bash_command, whose call, when the agent stops before it answers,
// ends at its deadline: the command's timeout, 1 s, its grace period, 2 s,
// and the margin) and waits until the host sees the agent stopped.
func hangItsAgent(t *testing.T, h running, how hang) {
	t.Helper()
	op := h.runBash(t, orchestrator.RunBashRequest{Command: how.command, CommandTimeout: f64(1)})
	timedOut := op.Status == orchestrator.OpFailed && op.ErrorCode == wire.CodeGatewayTimeout &&
		strings.Contains(op.Error, h.server) && strings.Contains(op.Error, "the command")
	if !timedOut && (how.mustTimeOut || op.Status != orchestrator.OpSucceeded) {
		t.Fatalf("run_bash_command that hung its agent: %s %s %q, want FAILED gateway_timeout naming the server and the command (or SUCCEEDED, answered before the agent stopped, when that may be)",
			op.Status, op.ErrorCode, op.Error)
	}
	waitFor(t, "the host to see the agent stopped", func() (bool, error) {
		return agentState(t, h.e.Runtime, h.server) == "T", nil
	})
}

// agentState is the state letter (/proc/<pid>/stat) of the server's
// agent, the child of its sandbox's init, as the host sees it.
func agentState(t *testing.T, rt *local.Runtime, serverID string) string {
	t.Helper()
	init, ok := rt.Pid(serverID)
	if !ok {
		t.Fatalf("server %s has no sandbox", serverID)
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", init, init))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range strings.Fields(string(children)) {
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if !strings.HasPrefix(string(cmd), "berth-agent\x00--listen") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return ""
		}
		// After "pid (comm) ": comm has no ") " here.
		_, rest, _ := strings.Cut(string(stat), ") ")
		return rest[:1]
	}
	return ""
}

// returns runs call and returns its error, failing the test when call
// does not return within the tests' deadline (far past any deadline the
// tests set): a call without a deadline of its own would wait for ever.
func returns(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		t.Fatalf("%s did not return within %s: it has no deadline", what, deadline)
		return nil
	}
}

// TestHungAgentCallsEndAtTheirDeadlines: root in a sandbox stops its own
// agent, or takes its socket and answers nothing. Every kind of call to
// it then ends at its deadline (set short here) with gateway_timeout
// naming the server and what timed out, instead of holding its caller for
// as long as the caller waits; and the health checks show the server
// unhealthy, in its view and in what the metrics count.
func TestHungAgentCallsEndAtTheirDeadlines(t *testing.T) {
	for _, how := range hangs {
		t.Run(how.name, func(t *testing.T) { hungCalls(t, how) })
	}
}

func hungCalls(t *testing.T, how hang) {
	h := newRunning(t, hungConfig(time.Hour))
	svc, alice, id := h.e.Svc, h.alice, h.server
	ctx := context.Background()
	sessionExec(t, svc, alice, id, "s", "echo hi > a.txt")
	hangItsAgent(t, h, how)

	waitFor(t, "the server to be shown unhealthy", func() (bool, error) {
		d, err := svc.GetServer(ctx, alice, id)
		return d.Unhealthy && d.UnhealthySince != nil && strings.Contains(d.HealthError, "health check"), err
	})
	if d, err := svc.GetServer(ctx, alice, id); err != nil || d.Status != orchestrator.ServerRunning {
		t.Fatalf("unhealthy server: %+v %v, want it still RUNNING (UnhealthyAfter is long here)", d.Server, err)
	}
	counts, err := h.e.Store.ServerCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(counts, func(c store.ServerCount) bool { return c.Status == orchestrator.ServerRunning }); i < 0 || counts[i].Unhealthy != 1 {
		t.Fatalf("server counts (what metrics report) %+v, want one RUNNING unhealthy", counts)
	}

	archive := tarOf(t, entry{name: "up.txt", body: "up"})
	ref := orchestrator.ArchiveRequest{ServerID: id}
	forward := func(h http.Header) error {
		target, err := svc.ForwardTarget(ctx, alice, "", id, "api/health")
		if err != nil {
			return err
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/forward/c/"+id+"/api/health", nil)
		maps.Copy(req.Header, h)
		svc.Forwarder().ServeHTTP(rec, req, target, "api/health")
		var e wire.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			return fmt.Errorf("status %d, body %q", rec.Code, rec.Body)
		}
		if rec.Code != http.StatusGatewayTimeout {
			return fmt.Errorf("status %d (%s), want 504", rec.Code, e.Error.Message)
		}
		return &e.Error
	}
	calls := []struct {
		name, what string
		call       func() error
	}{
		{"forward_request", "forward_request", func() error {
			_, err := svc.ForwardRequest(ctx, alice, orchestrator.ForwardRequest{ServerID: id, Path: "api/health"})
			return err
		}},
		{"streamed forward", "the forwarded request", func() error { return forward(nil) }},
		{"WebSocket forward", "the forwarded request", func() error {
			return forward(http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
				"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}})
		}},
		{"read_file", "read_file", func() error {
			_, err := svc.ReadFile(ctx, alice, orchestrator.ReadFileRequest{ServerID: id, Path: "a.txt"})
			return err
		}},
		{"write_file", "write_file", func() error {
			_, err := svc.WriteFile(ctx, alice, orchestrator.WriteFileRequest{ServerID: id, WriteFileRequest: wire.WriteFileRequest{Path: "b.txt", Content: "b"}})
			return err
		}},
		{"list_files", "list_files", func() error {
			_, err := svc.ListFiles(ctx, alice, orchestrator.ListFilesRequest{ServerID: id})
			return err
		}},
		{"archive download", "the archive download", func() error {
			_, err := svc.DownloadArchive(ctx, alice, ref, io.Discard)
			return err
		}},
		{"inline archive download", "the archive download", func() error {
			_, err := svc.DownloadArchiveInline(ctx, alice, ref)
			return err
		}},
		{"archive upload", "the archive upload", func() error {
			_, err := svc.UploadArchive(ctx, alice, ref, bytes.NewReader(archive))
			return err
		}},
		{"inline archive upload", "the archive upload", func() error {
			_, err := svc.UploadArchiveInline(ctx, alice, orchestrator.UploadArchiveRequest{ServerID: id, ArchiveBase64: base64.StdEncoding.EncodeToString(archive)})
			return err
		}},
		{"list_server_mcp_tools", "list_server_mcp_tools", func() error {
			_, err := svc.ListServerTools(ctx, alice, orchestrator.ServerToolsRequest{ServerID: id})
			return err
		}},
		{"call_server_mcp_tool", "call_server_mcp_tool", func() error {
			_, err := svc.CallServerTool(ctx, alice, orchestrator.CallServerToolRequest{ServerID: id, ToolName: "read_file", Arguments: map[string]any{"path": "a.txt"}})
			return err
		}},
		{"session exec", "the session command", func() error {
			_, err := svc.SessionExec(ctx, alice, id, "s", wire.SessionExecRequest{Command: "true", Timeout: 1})
			return err
		}},
		{"bash", "the session command", func() error {
			_, err := svc.Bash(ctx, alice, id, orchestrator.SessionBashRequest{Session: "s", SessionExecRequest: wire.SessionExecRequest{Command: "true", Timeout: 1}})
			return err
		}},
	}
	// All at once: each waits for its own deadline.
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { errs[i] = c.call() })
	}
	returns(t, "calls to the stopped agent", func() error { wg.Wait(); return nil })
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) { wantCode(t, errs[i], wire.CodeGatewayTimeout, id, c.what) })
	}

	// Commands run as operations end FAILED with the same code.
	op := h.runBash(t, orchestrator.RunBashRequest{Command: "true", CommandTimeout: f64(1)})
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeGatewayTimeout || !strings.Contains(op.Error, "the command") {
		t.Errorf("run_bash_command: %s %s %q, want FAILED gateway_timeout naming the command", op.Status, op.ErrorCode, op.Error)
	}
	op = h.runTests(t, orchestrator.RunTestsRequest{Command: "true", CommandTimeout: f64(1)})
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeGatewayTimeout || !strings.Contains(op.Error, "the test run") {
		t.Errorf("run_tests: %s %s %q, want FAILED gateway_timeout naming the test run", op.Status, op.ErrorCode, op.Error)
	}
}

// TestHungAgentFailsItsServer: an agent stopped from inside its sandbox
// fails its health checks; its server is shown unhealthy, then FAILED
// saying why once UnhealthyAfter has passed, and a server with
// restart_policy on_failure is restarted instead, its files kept, its new
// agent answering.
func TestHungAgentFailsItsServer(t *testing.T) {
	e := newService(t, hungConfig(3*time.Second))
	ctx := context.Background()
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "hung")
	start := func(name, policy string) running {
		id := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: name, RestartPolicy: policy}).ServerID
		return running{e: e, alice: alice, server: id}
	}
	plain, kept := start("plain", ""), start("kept", orchestrator.RestartOnFailure)
	sessionExec(t, e.Svc, alice, kept.server, "s", "echo survived > kept.txt")
	hangItsAgent(t, plain, hangs[0])
	hangItsAgent(t, kept, hangs[0])

	var srv orchestrator.ServerDetail
	waitFor(t, "the server of the stopped agent to be FAILED", func() (bool, error) {
		var err error
		srv, err = e.Svc.GetServer(ctx, alice, plain.server)
		return srv.Status == orchestrator.ServerFailed, err
	})
	if !strings.Contains(srv.Error, "its agent stopped answering health checks for") {
		t.Fatalf("the failed server says %q, want why", srv.Error)
	}
	if srv.Unhealthy {
		t.Errorf("a FAILED server is shown unhealthy: %+v", srv.Server)
	}
	// Newest first: found failed, after it was found unhealthy.
	failed := slices.IndexFunc(srv.Events, func(e runtime.Event) bool {
		return e.Reason == "server.failed" && e.Type == "Warning" && strings.Contains(e.Message, "stopped answering health checks")
	})
	unhealthy := slices.IndexFunc(srv.Events, func(e runtime.Event) bool {
		return e.Reason == "server.unhealthy" && strings.Contains(e.Message, "did not answer a health check")
	})
	if failed < 0 || unhealthy < failed {
		t.Fatalf("events %+v: want it found unhealthy, then failed", srv.Events)
	}

	waitFor(t, "the on_failure server to be restarted", func() (bool, error) {
		d, err := e.Svc.GetServer(ctx, alice, kept.server)
		return d.Status == orchestrator.ServerRunning && d.Restarts == 1, err
	})
	if got := sessionExec(t, e.Svc, alice, kept.server, "s", "cat kept.txt"); got.Stdout != "survived\n" {
		t.Fatalf("after the restart the workspace holds %q", got.Stdout)
	}
	d, err := e.Svc.GetServer(ctx, alice, kept.server)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(d.Events, func(e runtime.Event) bool {
		return e.Reason == "server.failed" && strings.Contains(e.Message, "stopped answering health checks") && strings.Contains(e.Message, "restarting it")
	}) || !slices.ContainsFunc(d.Events, func(e runtime.Event) bool {
		return e.Reason == "recover_server" && strings.Contains(e.Message, "SUCCEEDED")
	}) {
		t.Fatalf("the restarted server's events %+v: want its failure and its recovery", d.Events)
	}
}

// TestTimedOutCallClosesPooledConnections: a sandbox whose agent answers
// one request per connection and then holds each connection without
// answering (as root in a sandbox can make it) gets a call that goes out
// on a pooled connection cut at its deadline; the cut closes the server's
// other pooled connections too, so the next call dials afresh and is
// answered rather than going out on another dead one.
func TestTimedOutCallClosesPooledConnections(t *testing.T) {
	// No watcher rounds: a health check would dial connections of its own.
	cfg := hungConfig(time.Hour)
	cfg.WatchInterval = time.Hour
	h := newRunning(t, cfg)
	type connKey struct{}
	var mu sync.Mutex
	served := map[*int]bool{}
	both := make(chan struct{})
	first := 0
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, new(int))
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn := r.Context().Value(connKey{}).(*int)
			mu.Lock()
			again := served[conn]
			served[conn] = true
			if !again {
				if first++; first == 2 {
					close(both)
				}
			}
			n := first
			mu.Unlock()
			if again {
				<-hold // a request on a connection already used: never answered
				return
			}
			if n <= 2 {
				<-both // the first two wait for each other: two connections end up pooled
			}
			wire.WriteJSON(w, http.StatusOK, wire.ReadResult{Content: "fresh " + strconv.Itoa(n)})
		}),
	}
	h.e.StandInServer(t, h.server, srv)
	ctx := context.Background()
	read := func() (wire.ReadResult, error) {
		return h.e.Svc.ReadFile(ctx, h.alice, orchestrator.ReadFileRequest{ServerID: h.server, Path: "a.txt"})
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := read(); err != nil {
				t.Errorf("read on a fresh connection: %v", err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	err := returns(t, "a call on a pooled connection", func() error { _, err := read(); return err })
	wantCode(t, err, wire.CodeGatewayTimeout, h.server, "read_file")
	var res wire.ReadResult
	err = returns(t, "the next call", func() (err error) { res, err = read(); return err })
	if err != nil {
		t.Fatalf("the call after a timed-out one: %v; it went out on another pooled connection to the agent that did not answer", err)
	}
	if !strings.HasPrefix(res.Content, "fresh") {
		t.Fatalf("answer %+v", res)
	}
}
