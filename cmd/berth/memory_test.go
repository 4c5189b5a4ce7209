package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// rssTarget is what issue 8 asks of berth whatever sandboxes print or
// answer: peak RSS under 300 MB.
const rssTarget = 300 << 20

// TestServeMemoryBounded runs `berth serve` as its own process and measures
// its peak RSS (VmHWM) while a real sandbox prints 100 MB with
// max_output_bytes null, and then while a stand-in for the sandbox's agent
// (what root in the sandbox can put there) answers 400 MB, without a
// Content-Length, to every call berth reads whole, one after another and
// then eight at once, and last while the sandbox prints binary output.
// Each call must end bounded and berth's peak RSS stay under the target.
// The figures are logged for docs/benchmarks.md.
func TestServeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs berth serve")
	}
	b := startMemoryBerth(t)
	hwm := func() int64 { return vmHWM(t, b.cmd.Process.Pid) }
	base := hwm()

	c := b.call(t, "POST", "/api/clients", `{"name":"memory"}`, http.StatusOK)
	op := b.call(t, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":"base","wait_seconds":120}`, c["id"]), http.StatusOK)
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	srv := op["server_id"].(string)
	started := hwm()

	// A real sandbox printing 100 MB with no cap.
	op = b.call(t, "POST", "/api/servers/"+srv+"/bash",
		`{"command":"head -c 100000000 /dev/zero | tr '\\0' x","max_output_bytes":null,"wait_seconds":120}`, http.StatusOK)
	textResult, _ := op["result"].(string)
	if op["status"] != "SUCCEEDED" || len(textResult) > 5<<20 {
		t.Fatalf("100 MB with no cap: %v, %d bytes of result", op["status"], len(textResult))
	}
	printed := hwm()

	// The sandbox answers for its agent: 400 MB to everything.
	b.standIn(t, srv)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/servers/" + srv + "/bash", `{"command":"true","max_output_bytes":null,"wait_seconds":120}`},
		{"POST", "/api/servers/" + srv + "/sessions/s/exec", `{"command":"true","max_output_bytes":null}`},
		{"GET", "/api/servers/" + srv + "/files/content?path=f", ""},
		{"GET", "/api/servers/" + srv + "/files", ""},
		{"POST", "/api/servers/" + srv + "/mcp/call", `{"tool_name":"echo"}`},
		{"POST", "/api/forward-request", fmt.Sprintf(`{"server_id":%q,"path":"api/x"}`, srv)},
	} {
		if c.path == "/api/servers/"+srv+"/bash" {
			op := b.call(t, c.method, c.path, c.body, http.StatusOK)
			if op["status"] != "FAILED" || op["error_code"] != "bad_gateway" {
				t.Errorf("bash against 400 MB: %v", op)
			}
			continue
		}
		b.call(t, c.method, c.path, c.body, http.StatusBadGateway)
	}
	hostile := hwm()

	// The most a user may run at once (8 execs), all flooded: the answer
	// budget keeps their sum bounded too. An answer waiting for the
	// budget may fail as unavailable; none may succeed.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			op := b.call(t, "POST", "/api/servers/"+srv+"/bash", `{"command":"true","max_output_bytes":null,"wait_seconds":120}`, http.StatusOK)
			if code := op["error_code"]; op["status"] != "FAILED" || (code != "bad_gateway" && code != "unavailable") {
				t.Errorf("one of 8 flooded commands: %v", op)
			}
		})
	}
	wg.Wait()
	concurrent := hwm()

	// Last, as the peak only grows: binary output (NUL bytes, six bytes
	// of JSON each) on both streams with no cap, the costliest answer a
	// real agent gives.
	b.restore(t, srv)
	op = b.call(t, "POST", "/api/servers/"+srv+"/bash",
		`{"command":"head -c 100000000 /dev/zero; head -c 100000000 /dev/zero >&2","max_output_bytes":null,"wait_seconds":120}`, http.StatusOK)
	result, _ := op["result"].(string)
	if op["status"] != "SUCCEEDED" || len(result) > 20<<20 {
		t.Fatalf("binary output with no cap: %v %v, %d bytes of result", op["status"], op["error"], len(result))
	}
	binary := hwm()
	if binary > rssTarget {
		t.Errorf("berth's peak RSS reached %d MiB, want under %d MiB", binary>>20, rssTarget>>20)
	}

	t.Logf("berth serve VmHWM: %d MiB at start, %d MiB with a sandbox, %d MiB after 100 MB printed with no cap (%d bytes of result), "+
		"%d MiB after 400 MB answers to six kinds of call, %d MiB after 8 flooded commands at once, "+
		"%d MiB after 2 x 100 MB of binary output with no cap (%d bytes of result)",
		base>>20, started>>20, printed>>20, len(textResult), hostile>>20, concurrent>>20, binary>>20, len(result))
}

// memoryBerth is a running `berth serve` on a database of its own, with
// a stand-in for a sandbox's agent at hand.
type memoryBerth struct {
	*serveProcess
	token string
	dbURL string
	agent store.Endpoint // the real agent's, while a stand-in answers
}

func startMemoryBerth(t *testing.T) *memoryBerth {
	t.Helper()
	berthBin := buildBerth(t)
	data := t.TempDir()
	b := &memoryBerth{dbURL: storetest.URL(t)}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "BERTH_DATABASE_URL=" + b.dbURL}
	b.serveProcess = startServeAs(t, berthBin, data, env, nil)
	b.token = berthCommandEnv(t, berthBin, env, "token", "create", "--user", "ops", "--data-dir", data)
	return b
}

// call makes one REST call, wants the status and returns the JSON object
// answered.
func (b *memoryBerth) call(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	return apiCallWant(t, b.url, b.token, method, path, body, want)
}

// standIn puts a program answering 400 MB to every request in the place
// of the server's agent, as root in its sandbox can, by pointing the
// server's endpoint record at it.
func (b *memoryBerth) standIn(t *testing.T, serverID string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "standin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	const size = 400 << 20
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"stdout":"`))
		for sent := 11; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.setEndpoint(t, serverID, func(ep *store.Endpoint) {
		b.agent = *ep
		*ep = store.Endpoint{Network: "unix", Address: sock}
	})
}

// restore gives the server its real agent back after standIn.
func (b *memoryBerth) restore(t *testing.T, serverID string) {
	t.Helper()
	b.setEndpoint(t, serverID, func(ep *store.Endpoint) { *ep = b.agent })
}

// setEndpoint changes the server's endpoint record with change.
func (b *memoryBerth) setEndpoint(t *testing.T, serverID string, change func(*store.Endpoint)) {
	t.Helper()
	st, err := store.Open(t.Context(), b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := st.ServerByID(t.Context(), serverID)
	if err != nil || srv.Endpoint == nil {
		t.Fatalf("server %s: %+v %v", serverID, srv, err)
	}
	ep := *srv.Endpoint
	change(&ep)
	if _, err := st.SetServerRunning(t.Context(), serverID, ep); err != nil {
		t.Fatal(err)
	}
}

// vmHWM returns the peak resident set size of a process, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
