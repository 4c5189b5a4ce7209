package session

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// waitLimit bounds every condition a test waits for; generous because the
// test machine is small and shared.
const waitLimit = 20 * time.Second

func newTestManager(t *testing.T, o Options) *Manager {
	t.Helper()
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	m := NewManager(o)
	t.Cleanup(func() { m.Close() })
	return m
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// run executes cmd and fails the test on an error.
func run(t *testing.T, m *Manager, id, cmd string) wire.BashResult {
	t.Helper()
	return runReq(t, m, id, wire.SessionExecRequest{Command: cmd})
}

func runReq(t *testing.T, m *Manager, id string, req wire.SessionExecRequest) wire.BashResult {
	t.Helper()
	res, err := m.Exec(testCtx(t), id, req)
	if err != nil {
		t.Fatalf("exec %q in %s: %v", req.Command, id, err)
	}
	return res
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for its parent to reap it.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "process "+strconv.Itoa(pid)+" to end", func() bool { return !alive(pid) })
}

// killLater makes sure a process a test deliberately let escape ends.
func killLater(t *testing.T, pid int) {
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("want a number, got %q", s)
	}
	return n
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got none", code)
	}
	if got := wire.DetailOf(err).Code; got != code {
		t.Fatalf("want code %s, got %s (%v)", code, got, err)
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func sessionInfo(m *Manager, id string) (wire.SessionInfo, bool) {
	for _, s := range m.List() {
		if s.ID == id {
			return s, true
		}
	}
	return wire.SessionInfo{}, false
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
