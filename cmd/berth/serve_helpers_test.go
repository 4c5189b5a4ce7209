package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/pgembed"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/servetest"
)

// buildBerth builds berth and berth-agent into one directory (the server
// finds the agent next to itself) and returns the berth binary.
func buildBerth(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	for name, pkg := range map[string]string{"berth": ".", "berth-agent": "../berth-agent"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		build.Env = append(os.Environ(), goToolEnv...)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(bin, "berth")
}

// embeddedDataDir returns a fresh data directory the embedded database,
// which runs as the postgres account when the tests run as root, can reach.
// A database still running there when the test ends (one a command left
// to a server that was then killed, say) is stopped, as its operator would.
func embeddedDataDir(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	for p := data; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(postmasterPID(data)); err != nil {
			return
		}
		ctx := context.Background()
		db, err := pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(data, "pg")})
		if err == nil {
			err = db.Stop(ctx)
		}
		if err != nil {
			t.Errorf("stop the embedded database left running: %v", err)
		}
	})
	return data
}

// postmasterPID is where the embedded database says it runs.
func postmasterPID(data string) string { return filepath.Join(data, "pg", "data", "postmaster.pid") }

// serveProcess is a running `berth serve`.
type serveProcess struct {
	cmd *exec.Cmd
	url string
	log *syncbuf.Buffer
	// wait waits for the process to exit (never cmd.Wait).
	wait func() error
}

// startServe runs `berth serve` on data and waits until it says where it
// serves; it is stopped when the test ends.
func startServe(t *testing.T, berthBin, data string) *serveProcess {
	t.Helper()
	return startServeAs(t, berthBin, data, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, nil)
}

// startServeAs is startServe with the environment, process attributes
// (another user, say) and further arguments given.
func startServeAs(t *testing.T, berthBin, data string, env []string, attr *syscall.SysProcAttr, args ...string) *serveProcess {
	t.Helper()
	// Small volumes (allocated whole): tests share the machine's disk.
	cmd := exec.Command(berthBin, append([]string{"serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "warn", "--sandbox-disk", "256Mi"}, args...)...)
	cmd.Env, cmd.SysProcAttr = env, attr
	// Runs after the server stopped (cleanups run last first): agents
	// outlive their server, so the test removes what it left.
	t.Cleanup(func() { removeSandboxes(t, data) })
	p := servetest.Start(t, cmd)
	return &serveProcess{cmd: cmd, url: p.URL, log: p.Log, wait: p.Wait}
}

// apiCall calls the REST API as token, fails the test unless it answers
// 200, and returns the JSON answer.
func apiCall(t *testing.T, url, token, method, path, body string) map[string]any {
	t.Helper()
	return apiCallWant(t, url, token, method, path, body, http.StatusOK)
}

// apiCallWant is apiCall wanting another status.
func apiCallWant(t *testing.T, url, token, method, path, body string, want int) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %.500s, want %d", method, path, resp.StatusCode, raw, want)
	}
	var v map[string]any
	json.Unmarshal(raw, &v)
	return v
}

// berthCommand runs a berth CLI command to its end and returns its stdout.
func berthCommand(t *testing.T, berthBin string, args ...string) string {
	t.Helper()
	return berthCommandEnv(t, berthBin, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, args...)
}

// berthCommandEnv is berthCommand in the environment env.
func berthCommandEnv(t *testing.T, berthBin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(berthBin, args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// removeSandboxes deletes every sandbox left in data.
func removeSandboxes(t *testing.T, data string) {
	t.Helper()
	st, err := os.Stat(filepath.Join(data, "servers"))
	if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		return // none, or another user's (a server run as that user)
	}
	rt, err := local.New(local.Options{DataDir: data, AgentBinary: agentBin})
	if err != nil {
		t.Errorf("remove sandboxes left in %s: %v", data, err)
		return
	}
	defer rt.Close()
	ctx := context.Background()
	ids, _ := rt.List(ctx)
	for _, id := range ids {
		if err := rt.Delete(ctx, id); err != nil {
			t.Errorf("delete sandbox %s: %v", id, err)
		}
	}
}
