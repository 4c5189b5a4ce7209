package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-mcp/berth/internal/process"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestLocalReplicas runs two real `berth serve` replicas of the local
// runtime with full isolation on one PostgreSQL database, each with its
// own data directory (issue 18, items 4 and 5). Each sandbox belongs to
// the replica that made it: the other never marks, stops, takes over or
// deletes it, whatever either one's watcher does and however either
// restarts; a direct call reaching the other is told where the sandbox
// is, while operations sent there are run by the owner; and a replica
// killed with SIGKILL at a start, a command or a stop finishes or
// reports that work once restarted, while the survivor leaves it alone
// and says its owner is gone. Before, the replica holding the watcher
// lock marked the other's sandboxes FAILED ("vanished") within one
// round, the survivor took over the dead replica's operations on
// sandboxes it could not reach, and a stop interrupted by a kill stayed
// STOPPING for ever.
func TestLocalReplicas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: full isolation")
	}
	c := newReplicaPair(t)
	a, b := c.a, c.b
	sa := c.startServer(t, a, "on-a")
	sb := c.startServer(t, b, "on-b")
	c.exec(t, a, sa, "echo a > /workspace/mark")
	c.exec(t, b, sb, "echo b > /workspace/mark")
	procA, procB := sandboxProcess(t, a.data, sa), sandboxProcess(t, b.data, sb)
	live := map[string]string{sa: "RUNNING", sb: "RUNNING"}

	t.Log("each keeps its sandboxes through the other's rounds and restarts")
	{
		c.reconciled(t, a, live)
		c.reconciled(t, b, live)
		b.kill(t)
		b.start(t)
		c.reconciled(t, b, live)
		c.reconciled(t, a, live)
		a.stop(t)
		a.start(t)
		c.reconciled(t, a, live)
		c.reconciled(t, b, live)
		for id, p := range map[string]process.ID{sa: procA, sb: procB} {
			if !p.Running() {
				t.Errorf("the sandbox of %s (pid %d) is gone", id, p.Pid)
			}
		}
		if got := c.exec(t, a, sa, "cat /workspace/mark"); got != "a\n" {
			t.Errorf("A's sandbox after both restarts holds %q, want a", got)
		}
		if got := c.exec(t, b, sb, "cat /workspace/mark"); got != "b\n" {
			t.Errorf("B's sandbox after both restarts holds %q, want b", got)
		}
	}

	t.Log("a call reaching the other replica is told where to go")
	{
		for _, call := range []struct{ method, path, body string }{
			{"POST", "/api/servers/" + sa + "/sessions/main/exec", `{"command":"cat /workspace/mark"}`},
			{"GET", "/api/servers/" + sa + "/files?path=.", ""},
			{"GET", "/api/servers/" + sa + "/logs", ""},
		} {
			got := c.callWant(t, b, call.method, call.path, call.body, http.StatusMisdirectedRequest)
			msg := errorMessage(got)
			for _, want := range []string{sa, a.proc.url, "another berth replica", "send calls for this server there"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s %s at B: %q does not name %q", call.method, call.path, msg, want)
				}
			}
			if strings.Contains(msg, a.data) {
				t.Errorf("%s %s at B shows A's data directory: %q", call.method, call.path, msg)
			}
		}
		// An operation sent to B is run by A, which holds the sandbox.
		op := c.call(t, b, "POST", "/api/servers/"+sa+"/bash", `{"command":"cat /workspace/mark","wait_seconds":60}`)
		if res := opResult(op); op["status"] != "SUCCEEDED" || res["stdout"] != "a\n" {
			t.Errorf("run_bash_command on A's server sent to B: %v %v", op["status"], op)
		}
		detail := c.call(t, b, "GET", "/api/servers/"+sa, "")
		if p, _ := detail["placement"].(map[string]any); p == nil || p["url"] != a.proc.url || p["gone"] != false {
			t.Errorf("get_server at B: placement %v, want A (%s), not gone", detail["placement"], a.proc.url)
		}
	}

	t.Log("kill -9 during a command")
	{
		// The command outlives the replica that asked for it (the agent
		// runs it apart from the request) and ends when the test says;
		// the trap would mark an agent ending it early.
		op := c.call(t, a, "POST", "/api/servers/"+sa+"/bash",
			`{"command":"trap 'echo ended > /workspace/ended' TERM; echo run >> /workspace/runs; until [ -e /workspace/go ]; do sleep 0.1; done; echo finished"}`)
		opID := op["id"].(string)
		c.exec(t, a, sa, "export KEPT=yes")
		eventually(t, "the command started", func() bool {
			return c.exec(t, a, sa, "cat /workspace/runs 2>/dev/null || true") == "run\n"
		})
		a.kill(t)
		c.survivorLeavesIt(t, b, sb, opID)
		c.wantOperation(t, opID, "IN_PROGRESS", 1)
		c.ownerGoneAtB(t, sa)
		a.start(t)
		c.exec(t, a, sa, "touch /workspace/go")
		done := c.call(t, a, "GET", "/api/operations/"+opID+"?wait_seconds=120", "")
		res, _ := done["result"].(map[string]any)
		if done["status"] != "SUCCEEDED" || res == nil || res["stdout"] != "finished\n" {
			t.Fatalf("the command of a killed replica, after its restart: %v, want SUCCEEDED with its own output", done)
		}
		c.wantServer(t, sa, "RUNNING")
		if !procA.Running() {
			t.Fatal("the sandbox did not survive its replica")
		}
		if got := c.exec(t, a, sa, "cat /workspace/mark /workspace/runs; cat /workspace/ended 2>/dev/null; echo $KEPT"); got != "a\nrun\nyes\n" {
			t.Fatalf("the sandbox after its replica's restart holds %q, want its files, the command run once and not ended early, and its shell as it was", got)
		}
	}

	t.Log("kill -9 during a start")
	{
		id, opID := c.killDuringStart(t)
		c.survivorLeavesIt(t, b, sb, opID)
		c.wantOperation(t, opID, "IN_PROGRESS", 1)
		c.wantServer(t, id, "STARTING")
		if _, err := os.Stat(filepath.Join(b.data, "servers", id)); !os.IsNotExist(err) {
			t.Fatalf("B made a sandbox for A's server (%v)", err)
		}
		a.start(t)
		done := c.call(t, a, "GET", "/api/operations/"+opID+"?wait_seconds=120", "")
		if done["status"] != "SUCCEEDED" {
			t.Fatalf("the start of a killed replica, after its restart: %v", done)
		}
		c.wantOperation(t, opID, "SUCCEEDED", 2)
		if got := c.exec(t, a, id, "echo up"); got != "up\n" {
			t.Fatalf("the started server answers %q", got)
		}
	}

	t.Log("kill -9 during a stop")
	{
		// A command that ignores SIGTERM holds the agent, so the stop
		// waits for the sandbox (10 s, then SIGKILL): long enough to
		// kill its replica in the middle.
		c.call(t, a, "POST", "/api/servers/"+sa+"/bash",
			`{"command":"trap '' TERM; echo held > /workspace/held; sleep 600","graceful_termination_timeout":120}`)
		eventually(t, "the command holding the agent started", func() bool {
			return c.exec(t, a, sa, "cat /workspace/held 2>/dev/null || true") == "held\n"
		})
		go apiCallQuiet(a.proc.url, c.token, "DELETE", "/api/servers/"+sa)
		eventually(t, "the server stopping", func() bool { return c.serverStatus(t, sa) == "STOPPING" })
		a.kill(t)
		if !procA.Running() {
			t.Fatal("the sandbox stopped before its replica was killed: the kill was not during the stop")
		}
		c.survivorLeavesIt(t, b, sb, c.stopOperation(t, sa))
		c.wantServer(t, sa, "STOPPING")
		a.start(t)
		eventually(t, "the restarted replica finishing the stop", func() bool { return c.serverStatus(t, sa) == "STOPPED" })
		if procA.Running() {
			t.Error("the stopped server's sandbox still runs")
		}
		if _, err := os.Stat(filepath.Join(a.data, "servers", sa)); !os.IsNotExist(err) {
			t.Errorf("the stopped server's sandbox directory is still there (%v)", err)
		}
		if got := c.call(t, a, "DELETE", "/api/servers/"+sa, ""); got["status"] != "STOPPED" {
			t.Errorf("stopping it again: %v", got)
		}
		c.wantServer(t, sb, "RUNNING")
	}
}

// replicaPair is two `berth serve` replicas of the local runtime on one
// database, with a token of its first user (an admin).
type replicaPair struct {
	a, b  *replica
	db    *store.Store
	token string
}

// replica is one `berth serve` of a pair, which the test may kill and
// start again on the same data directory.
type replica struct {
	name, bin, data string
	env, args       []string
	proc            *serveProcess
}

func newReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	bin := buildBerth(t)
	url := storetest.URL(t)
	key := filepath.Join(t.TempDir(), "hmac.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "BERTH_DATABASE_URL=" + url}
	// Short rounds and leases: what the replicas do (or used to do) to
	// each other happens within a second or two.
	args := []string{"--hmac-key-file", key, "--watch-interval", "200ms", "--operation-lease", "2s"}
	c := &replicaPair{db: storetest.Open(t, url)}
	for _, r := range []**replica{&c.a, &c.b} {
		*r = &replica{name: map[**replica]string{&c.a: "A", &c.b: "B"}[r], bin: bin, data: t.TempDir(), env: env, args: args}
		(*r).start(t)
	}
	c.token = berthCommandEnv(t, bin, env, "token", "create", "--user", "ops", "--data-dir", c.a.data)
	return c
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	r.proc = startServeAs(t, r.bin, r.data, r.env, nil, r.args...)
}

// kill ends the replica with SIGKILL, as a crash would.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	r.proc.cmd.Process.Kill()
	r.proc.wait()
}

// stop ends the replica with SIGTERM, as an operator would.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.proc.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.proc.wait(); err != nil {
		t.Fatalf("replica %s did not stop cleanly: %v\n%s", r.name, err, r.proc.log.String())
	}
}

func (c *replicaPair) call(t *testing.T, r *replica, method, path, body string) map[string]any {
	t.Helper()
	return c.callWant(t, r, method, path, body, http.StatusOK)
}

func (c *replicaPair) callWant(t *testing.T, r *replica, method, path, body string, want int) map[string]any {
	t.Helper()
	return apiCallWant(t, r.proc.url, c.token, method, path, body, want)
}

// startServer starts a server through r and waits for it.
func (c *replicaPair) startServer(t *testing.T, r *replica, name string) string {
	t.Helper()
	client := c.call(t, r, "POST", "/api/clients", `{"name":"`+name+`"}`)
	op := c.call(t, r, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base","server_name":%q,"wait_seconds":120}`, client["id"], name))
	id, _ := opResult(op)["server_id"].(string)
	if op["status"] != "SUCCEEDED" || id == "" {
		t.Fatalf("start %s through %s: %v", name, r.name, op)
	}
	return id
}

// exec runs a command in the server's persistent shell through r and
// returns its stdout, failing the test unless it exits 0.
func (c *replicaPair) exec(t *testing.T, r *replica, serverID, command string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"command": command})
	res := c.call(t, r, "POST", "/api/servers/"+serverID+"/sessions/main/exec", string(b))
	if res["exit_code"] != float64(0) {
		t.Fatalf("%q through %s: %v", command, r.name, res)
	}
	out, _ := res["stdout"].(string)
	return out
}

// reconciled waits until r's runtime owner has reconciled its sandboxes
// with the records in full at least once after this call began, failing
// as soon as any server of want leaves its status. An empty directory
// planted among r's sandboxes is an orphan its owner deletes in the
// first phase of a round; three planted one after another prove that a
// round started after the call and ended before the third was deleted.
func (c *replicaPair) reconciled(t *testing.T, r *replica, want map[string]string) {
	t.Helper()
	for range 3 {
		orphan := filepath.Join(r.data, "servers", uuid.NewString())
		if err := os.Mkdir(orphan, 0o700); err != nil {
			t.Fatal(err)
		}
		eventually(t, "replica "+r.name+" deleting an orphan among its sandboxes", func() bool {
			for id, status := range want {
				if got := c.serverStatus(t, id); got != status {
					t.Fatalf("server %s is %s (%s), want %s", id, got, c.serverError(t, id), status)
				}
			}
			_, err := os.Stat(orphan)
			return os.IsNotExist(err)
		})
	}
}

// survivorLeavesIt makes sure the survivor b had every chance to take
// over the dead replica's work, and did not: the dead one's lease on
// opID ("" for none) has run out, b's workers then claimed and ran an
// operation scheduled after it (workers claim the oldest due operation
// first), and b reconciled its sandboxes.
func (c *replicaPair) survivorLeavesIt(t *testing.T, b *replica, bServer, opID string) {
	t.Helper()
	if opID != "" {
		eventually(t, "the dead replica's lease running out", func() bool {
			var expired bool
			err := c.db.Pool.QueryRow(t.Context(), `SELECT coalesce(lease_expires_at < now(), true) FROM operations WHERE id = $1`, opID).Scan(&expired)
			if err != nil {
				t.Fatal(err)
			}
			return expired
		})
	}
	op := c.call(t, b, "POST", "/api/servers/"+bServer+"/bash", `{"command":"true"}`)
	done := c.call(t, b, "GET", fmt.Sprintf("/api/operations/%s?wait_seconds=120", op["id"]), "")
	if done["status"] != "SUCCEEDED" {
		t.Fatalf("the survivor's own command: %v", done)
	}
	c.reconciled(t, b, nil)
}

// ownerGoneAtB waits until B reports the owner of server id gone, then
// checks that a call for it through B says so, and that a command is
// refused rather than left waiting for it.
func (c *replicaPair) ownerGoneAtB(t *testing.T, id string) {
	t.Helper()
	eventually(t, "B reporting A gone", func() bool {
		p, _ := c.call(t, c.b, "GET", "/api/servers/"+id, "")["placement"].(map[string]any)
		return p != nil && p["gone"] == true
	})
	for _, call := range []struct{ method, path, body string }{
		{"POST", "/api/servers/" + id + "/sessions/main/exec", `{"command":"true"}`},
		{"POST", "/api/servers/" + id + "/bash", `{"command":"true"}`},
	} {
		msg := errorMessage(c.callWant(t, c.b, call.method, call.path, call.body, http.StatusServiceUnavailable))
		for _, want := range []string{"which is gone", "no other replica can reach it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s %s at B with A gone: %q does not say %q", call.method, call.path, msg, want)
			}
		}
	}
}

// killDuringStart starts a server through A and kills A while the start
// runs (its sandbox's directory made, the server not running yet); a
// start that was done before the kill is tried again with a new server.
func (c *replicaPair) killDuringStart(t *testing.T) (serverID, opID string) {
	t.Helper()
	client := c.call(t, c.a, "POST", "/api/clients", `{"name":"killed-start"}`)
	for try := 1; ; try++ {
		op := c.call(t, c.a, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base"}`, client["id"]))
		serverID, _ = op["server_id"].(string)
		opID, _ = op["id"].(string)
		if serverID == "" || opID == "" {
			t.Fatalf("start through A: %v", op)
		}
		dir := filepath.Join(c.a.data, "servers", serverID)
		eventually(t, "A making the sandbox", func() bool {
			_, err := os.Stat(dir)
			return err == nil
		})
		c.a.kill(t)
		if c.serverStatus(t, serverID) == "STARTING" {
			return serverID, opID
		}
		if try == 5 {
			t.Fatal("every start finished before its replica was killed")
		}
		c.a.start(t)
	}
}

// stopOperation is the id of the server's stop operation, "" when it has
// none.
func (c *replicaPair) stopOperation(t *testing.T, serverID string) string {
	t.Helper()
	var id string
	c.db.Pool.QueryRow(t.Context(), `SELECT id::text FROM operations WHERE server_id = $1 AND type = 'stop_server'`, serverID).Scan(&id)
	return id
}

func (c *replicaPair) serverStatus(t *testing.T, id string) string {
	t.Helper()
	var status string
	if err := c.db.Pool.QueryRow(t.Context(), `SELECT status FROM servers WHERE id = $1`, id).Scan(&status); err != nil {
		t.Fatalf("server %s: %v", id, err)
	}
	return status
}

func (c *replicaPair) serverError(t *testing.T, id string) string {
	t.Helper()
	var msg string
	c.db.Pool.QueryRow(t.Context(), `SELECT error FROM servers WHERE id = $1`, id).Scan(&msg)
	return msg
}

func (c *replicaPair) wantServer(t *testing.T, id, status string) {
	t.Helper()
	if got := c.serverStatus(t, id); got != status {
		t.Fatalf("server %s is %s (%s), want %s", id, got, c.serverError(t, id), status)
	}
}

func (c *replicaPair) wantOperation(t *testing.T, id, status string, attempts int) {
	t.Helper()
	var gotStatus, msg string
	var gotAttempts int
	err := c.db.Pool.QueryRow(t.Context(), `SELECT status, error, attempts FROM operations WHERE id = $1`, id).Scan(&gotStatus, &msg, &gotAttempts)
	if err != nil {
		t.Fatal(err)
	}
	if gotStatus != status || gotAttempts != attempts {
		t.Fatalf("operation %s is %s after %d attempts (%q), want %s after %d", id, gotStatus, gotAttempts, msg, status, attempts)
	}
}

// sandboxProcess is the process of a server's sandbox, from its record.
func sandboxProcess(t *testing.T, data, id string) process.ID {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "servers", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p process.ID
	if err := json.Unmarshal(b, &p); err != nil || !p.Running() {
		t.Fatalf("sandbox record %s: %v", b, err)
	}
	return p
}

// opResult is an operation's result object.
func opResult(op map[string]any) map[string]any {
	res, _ := op["result"].(map[string]any)
	if res == nil {
		res = map[string]any{}
	}
	return res
}

func errorMessage(answer map[string]any) string {
	e, _ := answer["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// apiCallQuiet makes a call whose answer does not matter (its replica is
// killed while it runs).
func apiCallQuiet(url, token, method, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// eventually waits until cond holds, for up to two minutes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within two minutes", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
