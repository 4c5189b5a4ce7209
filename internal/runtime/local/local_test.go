//go:build linux

package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

const token = "runtime-test-token-runtime-test-token"

func newRuntime(t *testing.T, dataDir string) *local.Runtime {
	t.Helper()
	r, err := local.New(local.Options{DataDir: dataDir, AgentBinary: agentBin, Isolation: "full", Limits: local.Limits{DiskBytes: orchtest.SandboxDisk}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func dataDir(t testing.TB) string {
	d := t.TempDir()
	os.Chmod(d, 0o755)
	return d
}

func client(ep runtime.Endpoint) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, ep.Network, ep.Address)
	}}}
}

func bash(t *testing.T, ep runtime.Endpoint, command string) wire.BashResult {
	t.Helper()
	return bashAs(t, ep, "", command)
}

// bashAs runs command as user ("": the default user of commands).
func bashAs(t *testing.T, ep runtime.Endpoint, user, command string) wire.BashResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command, "user": user})
	req, _ := http.NewRequest("POST", "http://agent/api/tools/bash", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client(ep).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var res wire.BashResult
	if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
		t.Fatalf("bash %q: %d %s", command, resp.StatusCode, raw)
	}
	return res
}

func pidOf(t *testing.T, dir, id string) int {
	b, err := os.ReadFile(filepath.Join(dir, "servers", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Pid int }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Pid <= 0 {
		t.Fatalf("sandbox record %s: %v", b, err)
	}
	return rec.Pid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	os.MkdirAll(filepath.Join(dir, "images", "py"), 0o755)
	os.WriteFile(filepath.Join(dir, "images", "py", "hello.txt"), []byte("from template\n"), 0o644)
	t.Setenv("BERTH_TEST_ORCHESTRATOR_SECRET", "must-not-leak")
	r := newRuntime(t, dir)
	t.Logf("isolation: %s", r.Info().Isolation)

	spec := runtime.Spec{ServerID: "srv-1", ImageTag: "py", AgentToken: token, Env: map[string]string{"GREETING": "hi"}}
	if err := r.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), "srv-1") })
	pid := pidOf(t, dir, "srv-1")
	if err := r.Create(ctx, spec); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if pidOf(t, dir, "srv-1") != pid {
		t.Fatal("a second Create started another agent")
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := r.WaitReady(waitCtx, "srv-1")
	if err != nil {
		t.Fatal(err)
	}
	res := bash(t, ep, "cat hello.txt; echo $GREETING; echo secret=$BERTH_TEST_ORCHESTRATOR_SECRET")
	if res.Stdout != "from template\nhi\nsecret=\n" {
		t.Fatalf("sandbox output %q", res.Stdout)
	}
	st, err := r.Status(ctx, "srv-1")
	if err != nil || st.State != runtime.StateReady {
		t.Fatalf("status %+v %v", st, err)
	}
	if logs, err := r.Logs(ctx, "srv-1", 50); err != nil || !strings.Contains(logs, "listening") {
		t.Fatalf("logs %q %v", logs, err)
	}
	ids, _ := r.List(ctx)
	if len(ids) != 1 || ids[0] != "srv-1" {
		t.Fatalf("List = %v", ids)
	}
	if err := r.Delete(ctx, "srv-1"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if st, _ := r.Status(ctx, "srv-1"); st.State != runtime.StateGone {
		t.Fatalf("after delete: %+v", st)
	}
	if err := r.Delete(ctx, "srv-1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// TestAdoptsAgentsOfAPreviousRun plays an orchestrator restart: a second
// runtime on the same data dir finds the running agent, serves it, and
// can delete it.
func TestAdoptsAgentsOfAPreviousRun(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	first := newRuntime(t, dir)
	if err := first.Create(ctx, runtime.Spec{ServerID: "keep", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Delete(context.Background(), "keep") })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := first.WaitReady(waitCtx, "keep"); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, dir, "keep")

	second := newRuntime(t, dir)
	if st, err := second.Status(ctx, "keep"); err != nil || st.State != runtime.StateReady {
		t.Fatalf("adopted status %+v %v", st, err)
	}
	if err := second.Create(ctx, runtime.Spec{ServerID: "keep", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	if pidOf(t, dir, "keep") != pid {
		t.Fatal("Create after adoption started a second agent")
	}
	if err := second.Delete(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestDeadAgentIsReportedAndRecreated kills an agent behind the runtime's
// back: Status says failed, and Create brings it back with the workspace
// intact.
func TestDeadAgentIsReportedAndRecreated(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	r := newRuntime(t, dir)
	spec := runtime.Spec{ServerID: "crashy", AgentToken: token}
	if err := r.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), "crashy") })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := r.WaitReady(waitCtx, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	bash(t, ep, "echo kept > file.txt")
	pid := pidOf(t, dir, "crashy")
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := r.Status(ctx, "crashy")
		if st.State == runtime.StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after kill: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if ep, err = r.WaitReady(waitCtx, "crashy"); err != nil {
		t.Fatal(err)
	}
	if res := bash(t, ep, "cat file.txt"); res.Stdout != "kept\n" {
		t.Fatalf("workspace lost: %q", res.Stdout)
	}
}

func TestRejectsBadIDs(t *testing.T) {
	r := newRuntime(t, dataDir(t))
	for _, id := range []string{"", "../x", "A", "a/b"} {
		if err := r.Create(context.Background(), runtime.Spec{ServerID: id, AgentToken: token}); err == nil {
			t.Errorf("Create(%q) succeeded", id)
		}
	}
}

// TestDeepDataDir starts a sandbox under a data dir so deep that the
// socket could not live in it (unix socket paths stop at 107 bytes).
func TestDeepDataDir(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	// Let every uid reach the data dir, so sandboxes run isolated as their
	// own uid and must reach the socket directory outside it.
	os.Chmod(filepath.Dir(dir), 0o755)
	deep := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 40))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := deep; p != dir; p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	r := newRuntime(t, deep)
	id := "0123456789abcdef0123456789abcdef0123"
	if err := r.Create(ctx, runtime.Spec{ServerID: id, AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), id) })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := r.WaitReady(waitCtx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Address) > 107 {
		t.Fatalf("socket path is %d bytes", len(ep.Address))
	}
	if res := bash(t, ep, "echo deep"); res.Stdout != "deep\n" {
		t.Fatalf("output %q", res.Stdout)
	}
	t.Logf("isolation: %s", r.Info().Isolation)
	if err := r.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(ep.Address); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// TestRelativeDataDir is `berth serve --data-dir .berth`: agents run from
// their workspace, so the runtime must hand them absolute paths.
func TestRelativeDataDir(t *testing.T) {
	ctx := context.Background()
	parent := dataDir(t)
	t.Chdir(parent)
	os.Mkdir("rel", 0o755)
	r := newRuntime(t, "rel")
	if err := r.Create(ctx, runtime.Spec{ServerID: "rel-1", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), "rel-1") })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := r.WaitReady(waitCtx, "rel-1")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(ep.Address) {
		t.Fatalf("endpoint %q is relative", ep.Address)
	}
}

// start creates a sandbox on r and waits for its agent.
func start(t *testing.T, r *local.Runtime, spec runtime.Spec) runtime.Endpoint {
	t.Helper()
	spec.AgentToken = token
	if err := r.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), spec.ServerID) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := r.WaitReady(ctx, spec.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestHidesBerthFilesUnderReadOnlyPaths: a data directory and key files
// under a path sandboxes see read-only (say /opt/berth) stay out of view.
func TestHidesBerthFilesUnderReadOnlyPaths(t *testing.T) {
	// Not under /tmp: sandboxes see a /tmp of their own.
	shared, err := os.MkdirTemp("/var/tmp", "berth-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	os.WriteFile(filepath.Join(shared, "public.txt"), []byte("public\n"), 0o644)
	os.WriteFile(filepath.Join(shared, "server.key"), []byte("do-not-read\n"), 0o644)
	data := filepath.Join(shared, "data")
	os.MkdirAll(data, 0o755)
	r, err := local.New(local.Options{
		DataDir: data, AgentBinary: agentBin, UIDRegistry: filepath.Join(t.TempDir(), "uids"),
		ReadOnlyPaths: append(slices.Clone(local.DefaultReadOnlyPaths), shared),
		HidePaths:     []string{filepath.Join(shared, "server.key")},
		Limits:        local.Limits{DiskBytes: orchtest.SandboxDisk},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ep := start(t, r, runtime.Spec{ServerID: "hider"})
	res := bash(t, ep, fmt.Sprintf("cat %[1]s/public.txt; cat %[1]s/server.key; ls -A %[1]s/data; echo done", shared))
	if res.Stdout != "public\ndone\n" {
		t.Fatalf("inside the sandbox: %q (stderr %q), want only the public file", res.Stdout, res.Stderr)
	}
}

// TestUIDBlocksAreUniqueAcrossBerths runs two runtimes (two berths on one
// host) on one uid registry: every sandbox gets a block of its own, a
// claim left by a berth whose data is gone is taken over, and a deleted
// sandbox's block is free again.
func TestUIDBlocksAreUniqueAcrossBerths(t *testing.T) {
	registry := filepath.Join(t.TempDir(), "uids")
	newOn := func() *local.Runtime {
		// Ids no other test's registry hands out.
		r, err := local.New(local.Options{DataDir: dataDir(t), AgentBinary: agentBin, UIDRegistry: registry, UIDBase: 1 << 30, UIDSlots: 4,
			Limits: local.Limits{DiskBytes: orchtest.SandboxDisk}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b := newOn(), newOn()
	// A stale claim: slot 0 held by a server directory that is gone.
	if err := os.WriteFile(filepath.Join(registry, "0"), []byte("/nonexistent/servers/x\nnonce\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	uidOf := func(ep runtime.Endpoint) string {
		return strings.Fields(bash(t, ep, "cat /proc/self/uid_map").Stdout)[1]
	}
	seen := map[string]string{}
	for i, r := range []*local.Runtime{a, b, a, b} {
		id := fmt.Sprintf("u-%d", i)
		uid := uidOf(start(t, r, runtime.Spec{ServerID: id}))
		if other, dup := seen[uid]; dup {
			t.Fatalf("sandboxes %s and %s share host uid %s", other, id, uid)
		}
		seen[uid] = id
	}
	// All four slots are taken (the stale one included): a fifth start
	// is refused, saying why.
	err := a.Create(context.Background(), runtime.Spec{ServerID: "u-full", AgentToken: token})
	if err == nil || !strings.Contains(err.Error(), "uid blocks") {
		t.Fatalf("fifth sandbox on four blocks: %v", err)
	}
	if err := b.Delete(context.Background(), "u-1"); err != nil {
		t.Fatal(err)
	}
	start(t, a, runtime.Spec{ServerID: "u-after"})
}
