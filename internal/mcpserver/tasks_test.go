package mcpserver_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestTasksTypeScript drives MCP tasks (2025-11-25) with the TypeScript
// SDK's experimental tasks client: a bash task polled to its result, a
// running one cancelled (its command really stops), another user refused
// both, and tasks/list.
func TestTasksTypeScript(t *testing.T) {
	node := interopNode(t)
	e := newEnv(t, mcpserver.GuardOptions{})
	e.Token(t, "admin")
	alice, _ := e.Token(t, "alice")
	bob, _ := e.Token(t, "bob")
	out := runNode(t, node, 3*time.Minute, []string{"BERTH_MCP_URL=" + e.url, "BERTH_TOKEN=" + alice, "BERTH_TOKEN2=" + bob}, alice, "tasks-client.mjs", "flow")
	var s struct {
		Capabilities           map[string]any
		TaskSupport            map[string]string
		CreatedStatus          string
		TaskID                 string
		Statuses               []string
		ResultIsError          bool
		RelatedTask            string
		ResultStatus, Stdout   string
		CancelStatus           string
		GetAfterCancel         string
		OtherGet, OtherCancel  string
		OtherListed            bool
		LateFile               string
		CancelAgain            string
		CancelledResultIsError bool
		Listed                 bool
		Missing                string
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	t.Logf("summary: %+v", s)
	if _, ok := s.Capabilities["requests"]; !ok {
		t.Errorf("initialize declares tasks %v, want requests.tools.call", s.Capabilities)
	}
	for _, name := range []string{"start_server", "restart_server", "run_bash_command", "run_tests"} {
		if s.TaskSupport[name] != "optional" {
			t.Errorf("%s taskSupport %q, want optional (all: %v)", name, s.TaskSupport[name], s.TaskSupport)
		}
	}
	if _, ok := s.TaskSupport["build_images_from_yaml"]; ok || len(s.TaskSupport) != 4 {
		t.Errorf("task tools %v, want exactly the four single-operation long-running tools", s.TaskSupport)
	}
	if s.CreatedStatus != "working" || len(s.Statuses) == 0 || s.Statuses[len(s.Statuses)-1] != "completed" {
		t.Errorf("task created %q, polled %v: want working, then completed", s.CreatedStatus, s.Statuses)
	}
	if s.ResultIsError || s.RelatedTask != s.TaskID || s.ResultStatus != "SUCCEEDED" || s.Stdout != "done\n" {
		t.Errorf("task result: isError %v, related task %q (task %q), status %q, stdout %q", s.ResultIsError, s.RelatedTask, s.TaskID, s.ResultStatus, s.Stdout)
	}
	if s.CancelStatus != "cancelled" || s.GetAfterCancel != "cancelled" || s.LateFile != "no" || !s.CancelledResultIsError {
		t.Errorf("cancel: status %q, then %q, late file %q, result isError %v", s.CancelStatus, s.GetAfterCancel, s.LateFile, s.CancelledResultIsError)
	}
	if !strings.Contains(s.CancelAgain, "already finished") {
		t.Errorf("cancelling a cancelled task: %q, want it refused as finished", s.CancelAgain)
	}
	if !strings.Contains(s.OtherGet, "not found") || !strings.Contains(s.OtherCancel, "not found") || s.OtherListed {
		t.Errorf("another user: get %q, cancel %q, listed %v: want not found twice and unlisted", s.OtherGet, s.OtherCancel, s.OtherListed)
	}
	if !s.Listed || !strings.Contains(s.Missing, "not found") {
		t.Errorf("tasks/list has both tasks: %v; unknown task: %q", s.Listed, s.Missing)
	}
}

// heldRuntime is the real runtime whose first WaitReady announces itself
// on entered and holds until the replica shuts down, so a start is known
// to be in flight on that replica when it dies.
type heldRuntime struct {
	runtime.Runtime
	once    sync.Once
	entered chan struct{}
}

func (h *heldRuntime) WaitReady(ctx context.Context, id string) (runtime.Endpoint, error) {
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return h.Runtime.WaitReady(ctx, id)
	}
	close(h.entered)
	<-ctx.Done()
	return runtime.Endpoint{}, ctx.Err()
}

// TestTaskSurvivesReplica creates a start_server task through replica
// A's /mcp with the TypeScript SDK, kills A (its HTTP server and its
// workers) while the start runs there, and finishes the task through
// replica B's /mcp: B's workers take the operation over when A's lease
// ends, and B answers tasks/get and tasks/result from the database.
func TestTaskSurvivesReplica(t *testing.T) { taskSurvivesReplica(t, "tasks-client.mjs") }

// taskSurvivesReplica runs script create on replica A, kills A while the
// start runs there, and runs script finish on replica B.
func taskSurvivesReplica(t *testing.T, script string) {
	node := interopNode(t)
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	held := &heldRuntime{Runtime: orchtest.NewRuntime(t, agentBin, dir, nil), entered: make(chan struct{})}
	// Both runtimes are made before any sandbox runs: each probes its
	// isolation with a sandbox in the shared data dir.
	rtB := orchtest.NewRuntime(t, agentBin, dir, nil)
	a, closeA, urlA := taskReplica(t, url, "replica-a", held)
	stopA := orchtest.Run(t, a)
	// B's workers start only once A died, so the start runs on A first.
	b, _, urlB := taskReplica(t, url, "replica-b", rtB)
	e := &orchtest.Env{Svc: a}
	e.Token(t, "admin")
	tok, _ := e.Token(t, "alice")

	out := runNode(t, node, time.Minute, []string{"BERTH_MCP_URL=" + urlA, "BERTH_TOKEN=" + tok}, tok, script, "create")
	var created struct{ TaskID, Status string }
	if err := json.Unmarshal([]byte(lastLine(out)), &created); err != nil || created.TaskID == "" {
		t.Fatalf("create summary %q: %v", out, err)
	}
	select {
	case <-held.entered:
	case <-time.After(time.Minute):
		t.Fatal("the start never ran")
	}
	closeA()
	stopA()
	orchtest.Run(t, b)

	out = runNode(t, node, 2*time.Minute, []string{"BERTH_MCP_URL=" + urlB, "BERTH_TOKEN=" + tok}, tok, script, "finish", created.TaskID)
	var done struct {
		Status, StatusMessage, ResultStatus string
		ResultIsError, SawWorking           bool
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &done); err != nil {
		t.Fatalf("finish summary %q: %v", out, err)
	}
	if created.Status != "working" || done.Status != "completed" || done.ResultIsError || done.ResultStatus != "SUCCEEDED" {
		t.Fatalf("task created %q on A, finished on B as %+v: want working, then completed with a SUCCEEDED start", created.Status, done)
	}
}

// taskReplica starts one orchestrator replica on the database at url
// with its own /mcp server (not yet its workers: orchtest.Run starts
// them); closeHTTP closes the server.
func taskReplica(t *testing.T, url, id string, rt runtime.Runtime) (svc *orchestrator.Service, closeHTTP func(), mcpURL string) {
	t.Helper()
	st := storetest.Open(t, url)
	svc, err := orchestrator.New(st, rt, orchtest.Config(orchestrator.Config{ReplicaID: id}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpURL = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: mcpserver.New(svc, mcpserver.Options{
		Auth:  auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth"},
		Guard: mcpserver.GuardOptions{Hosts: hostguard.Options{PublicURL: mcpURL}},
	}).Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return svc, func() { srv.Close() }, mcpURL
}
