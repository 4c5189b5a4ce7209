package bash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/agent/output"
	"github.com/berth-mcp/berth/internal/wire"
)

func f64(v float64) *float64 { return &v }

func run(t *testing.T, r *Runner, req wire.BashRequest) wire.BashResult {
	t.Helper()
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.Command, err)
	}
	return res
}

// alive reports whether pid is a live process; a zombie counts as dead
// because it runs nothing and only waits for a parent that may never reap.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone waits until every pid is dead, failing after a deadline.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still alive", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// readPid reads a pid a command wrote into dir/name, and makes sure the
// process does not outlive the test even if the assertion fails.
func readPid(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("bad pid in %s: %q", name, b)
	}
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

func TestStdoutStderrExitCode(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{Command: "echo out; echo err >&2; exit 3"})
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.TimedOut {
		t.Fatalf("got %+v", res)
	}
	if res.StdoutTruncatedBytes != 0 || res.StderrTruncatedBytes != 0 {
		t.Fatalf("nothing should be truncated: %+v", res)
	}
	res = run(t, r, wire.BashRequest{Command: "echo fine"})
	if res.ExitCode != 0 || res.Stdout != "fine\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestStdinIsDevNull(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	// cat must see EOF at once, and children must not inherit the
	// command pipe on fd 3.
	res := run(t, r, wire.BashRequest{Command: "cat; readlink /proc/self/fd/0; /usr/bin/test -e /proc/self/fd/3 && echo fd3-leaked || echo fd3-closed"})
	if res.Stdout != "/dev/null\nfd3-closed\n" || res.ExitCode != 0 {
		t.Fatalf("got %+v", res)
	}
}

func TestKilledBySignalExitCode(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{Command: "echo before; kill -KILL $$"})
	if res.ExitCode != 128+9 || res.TimedOut || res.Stdout != "before\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestCwdAndEnv(t *testing.T) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	r := &Runner{Workspace: ws, BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "KEEP=1", "FOO=old"}}
	for _, tc := range []struct{ cwd, want string }{{"", ws}, {"sub", sub}, {other, other}} {
		res := run(t, r, wire.BashRequest{Command: "pwd -P", Cwd: tc.cwd})
		want, _ := filepath.EvalSymlinks(tc.want)
		if res.Stdout != want+"\n" {
			t.Errorf("cwd %q: pwd = %q, want %q", tc.cwd, res.Stdout, want)
		}
	}
	res := run(t, r, wire.BashRequest{
		Command: `echo "$FOO $KEEP $NEW"; env | grep -c '^FOO='`,
		Env:     map[string]string{"FOO": "bar", "NEW": "x y"},
	})
	if res.Stdout != "bar 1 x y\n1\n" {
		t.Fatalf("env: got %q", res.Stdout)
	}
}

func TestStripOutput(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{Command: `printf '\n  out \n\n'; printf ' \terr\n' >&2`, StripOutput: true})
	if res.Stdout != "out" || res.Stderr != "err" {
		t.Fatalf("got %q %q", res.Stdout, res.Stderr)
	}
}

// longCommand is a command far above the 128 KiB limit of one argv string.
func longCommand() (string, int) {
	n := 300 << 10
	return "v='" + strings.Repeat("a", n) + "'\necho ${#v}", n
}

func TestLongCommand(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	cmd, n := longCommand()
	res := run(t, r, wire.BashRequest{Command: cmd})
	if res.Stdout != strconv.Itoa(n)+"\n" || res.ExitCode != 0 {
		t.Fatalf("got stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

func TestTimeoutKeepsPartialOutputAndKillsTree(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	cmd := `echo partial; echo err >&2
sleep 1000 & echo $! > child.pid
( sleep 1000 & echo $! > grandchild.pid; wait ) & echo $! > sub.pid
wait`
	res := run(t, r, wire.BashRequest{Command: cmd, CommandTimeout: f64(2), GracefulTerminationTimeout: f64(1)})
	if !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("want a timeout, got %+v", res)
	}
	if res.Stdout != "partial\n" || res.Stderr != "err\n" {
		t.Fatalf("partial output lost: %+v", res)
	}
	if res.DurationMS < 2000 {
		t.Fatalf("returned after %d ms, before the 2 s timeout", res.DurationMS)
	}
	waitGone(t, readPid(t, ws, "child.pid"), readPid(t, ws, "sub.pid"), readPid(t, ws, "grandchild.pid"))
}

func TestContextCancelEndsCommand(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan wire.BashResult, 1)
	go func() {
		res, err := r.Run(ctx, wire.BashRequest{Command: "echo started; sleep 1000 & echo $! > child.pid; wait"})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	pidFile := filepath.Join(ws, "child.pid")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pid := readPid(t, ws, "child.pid")
	cancel()
	res := <-done
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" {
		t.Fatalf("got %+v", res)
	}
	waitGone(t, pid)

	if _, err := r.Run(ctx, wire.BashRequest{Command: "true"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a done context: err = %v, want context.Canceled", err)
	}
}

func TestGraceThenSIGKILL(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	// Ignoring TERM is inherited by the sleep, so only SIGKILL ends them.
	res := run(t, r, wire.BashRequest{
		Command:                    "trap '' TERM; echo ready; sleep 1000 & echo $! > child.pid; wait; echo survived-term",
		CommandTimeout:             f64(1),
		GracefulTerminationTimeout: f64(1.5),
	})
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "ready\n" {
		t.Fatalf("got %+v", res)
	}
	if res.DurationMS < 2500 {
		t.Fatalf("SIGKILL came after %d ms, before timeout+grace (2500 ms)", res.DurationMS)
	}
	waitGone(t, readPid(t, ws, "child.pid"))
}

func TestTermIsSentFirst(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{
		Command:                    "trap 'echo got-term; exit 0' TERM; while :; do sleep 0.05; done",
		CommandTimeout:             f64(0.5),
		GracefulTerminationTimeout: f64(30),
	})
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "got-term\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestBackgroundChildKilledAfterExit(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	// The child keeps stdout open; Run must neither wait for it nor leave it.
	res := run(t, r, wire.BashRequest{Command: "sleep 1000 & echo $! > child.pid; echo done"})
	if res.ExitCode != 0 || res.TimedOut || res.Stdout != "done\n" {
		t.Fatalf("got %+v", res)
	}
	waitGone(t, readPid(t, ws, "child.pid"))
}

func TestEscapedGrandchildDoesNotHang(t *testing.T) {
	ws := t.TempDir()
	r := &Runner{Workspace: ws}
	// setsid leaves the process group, so the group kill cannot reach it,
	// and it holds stdout open: only the bounded drain lets Run return.
	res := run(t, r, wire.BashRequest{Command: "setsid sleep 1000 & echo $! > escaped.pid; echo done"})
	pid := readPid(t, ws, "escaped.pid")
	if res.ExitCode != 0 || res.Stdout != "done\n" {
		t.Fatalf("got %+v", res)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
}

func TestHugeOutputIsBounded(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	const total = 200_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, r, wire.BashRequest{Command: fmt.Sprintf("echo start; head -c %d /dev/zero; echo end", total)})
	runtime.ReadMemStats(&after)

	// NUL bytes take six bytes of JSON each (\u0000): the output is
	// fitted to twice the limit in JSON text, so fewer bytes are kept.
	limit := int64(wire.DefaultMaxOutputBytes)
	written := int64(total + len("start\n") + len("end\n"))
	marker := output.Marker(res.StdoutTruncatedBytes)
	kept := int64(len(res.Stdout) - len(marker))
	if kept+res.StdoutTruncatedBytes != written || kept > limit/2 || kept < limit/4 {
		t.Fatalf("kept %d bytes and dropped %d, want a third of the %d-byte limit and the rest of %d dropped", kept, res.StdoutTruncatedBytes, limit, written)
	}
	if b, _ := json.Marshal(res.Stdout); int64(len(b)) > wire.OutputJSONFit*limit+64 {
		t.Fatalf("stdout is %d bytes of JSON, want at most %d", len(b), wire.OutputJSONFit*limit)
	}
	if !strings.HasPrefix(res.Stdout, "start\n\x00") || !strings.HasSuffix(res.Stdout, "\x00end\n") || !strings.Contains(res.Stdout, marker) {
		t.Fatalf("want head, marker and tail; got prefix %q suffix %q", res.Stdout[:8], res.Stdout[len(res.Stdout)-8:])
	}
	// Everything the test process allocated during the run, not just what
	// is live at the end: streaming must not buffer the stream.
	grown := after.TotalAlloc - before.TotalAlloc
	if grown > 50<<20 {
		t.Fatalf("allocated %d MB while streaming 200 MB", grown>>20)
	}
	t.Logf("allocated %.1f MB while streaming 200 MB", float64(grown)/(1<<20))
}

func TestOutputLimits(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{Command: "head -c 3000000 /dev/zero; head -c 10 /dev/zero >&2", MaxOutputBytes: wire.Null()})
	if len(res.Stdout) != 3000000 || res.StdoutTruncatedBytes != 0 || len(res.Stderr) != 10 {
		t.Fatalf("null limit: stdout %d bytes, truncated %d", len(res.Stdout), res.StdoutTruncatedBytes)
	}
	res = run(t, r, wire.BashRequest{Command: "printf 0123456789; printf abcdefghij >&2", MaxOutputBytes: wire.Int64(4)})
	if res.Stdout != "01"+output.Marker(6)+"89" || res.StdoutTruncatedBytes != 6 || res.StderrTruncatedBytes != 6 {
		t.Fatalf("limit 4: got %+v", res)
	}
}

func TestUserSwitch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("user switching needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	r := &Runner{Workspace: t.TempDir()}
	res := run(t, r, wire.BashRequest{Command: `id -u; id -g; echo "$HOME $USER $LOGNAME"`, User: "nobody", Cwd: "/"})
	want := fmt.Sprintf("%s\n%s\n%s nobody nobody\n", u.Uid, u.Gid, u.HomeDir)
	if res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("got %+v, want stdout %q", res, want)
	}
	res = run(t, r, wire.BashRequest{Command: "id -u", User: u.Uid, Cwd: "/"})
	if res.Stdout != u.Uid+"\n" {
		t.Fatalf("numeric user: got %+v", res)
	}
	// The command pipe must be readable by the other user too.
	cmd, n := longCommand()
	res = run(t, r, wire.BashRequest{Command: cmd, User: "nobody", Cwd: "/"})
	if res.Stdout != strconv.Itoa(n)+"\n" {
		t.Fatalf("long command as nobody: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// The temp workspace is private to root, so nobody cannot enter it.
	_, err = r.Run(context.Background(), wire.BashRequest{Command: "true", User: "nobody"})
	if d := detail(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "nobody") {
		t.Fatalf("unenterable cwd: got %v", err)
	}
}

func TestUserRulesWithoutRoot(t *testing.T) {
	self, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", self.Username, self.Uid} {
		if c, err := lookupCredential(name, 1000); c != nil || err != nil {
			t.Errorf("lookupCredential(%q) as non-root = %v, %v; want no switch", name, c, err)
		}
	}
	_, err = lookupCredential("someone-else", 1000)
	if d := detail(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "user switching needs the agent to run as root") {
		t.Fatalf("got %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Workspace: ws}
	cases := []struct {
		name string
		req  wire.BashRequest
		want string
	}{
		{"empty command", wire.BashRequest{}, "command"},
		{"blank command", wire.BashRequest{Command: " \n"}, "command"},
		{"zero timeout", wire.BashRequest{Command: "true", CommandTimeout: f64(0)}, "command_timeout"},
		{"negative timeout", wire.BashRequest{Command: "true", CommandTimeout: f64(-1)}, "command_timeout"},
		{"NaN timeout", wire.BashRequest{Command: "true", CommandTimeout: f64(math.NaN())}, "command_timeout"},
		{"negative grace", wire.BashRequest{Command: "true", GracefulTerminationTimeout: f64(-0.5)}, "graceful_termination_timeout"},
		{"infinite grace", wire.BashRequest{Command: "true", GracefulTerminationTimeout: f64(math.Inf(1))}, "graceful_termination_timeout"},
		{"negative limit", wire.BashRequest{Command: "true", MaxOutputBytes: wire.Int64(-1)}, "max_output_bytes"},
		{"missing cwd", wire.BashRequest{Command: "true", Cwd: "nope"}, `cwd "nope"`},
		{"cwd is a file", wire.BashRequest{Command: "true", Cwd: "file"}, `cwd "file"`},
		{"bad env name", wire.BashRequest{Command: "true", Env: map[string]string{"1X": "a"}}, `"1X"`},
		{"env name with dash", wire.BashRequest{Command: "true", Env: map[string]string{"A-B": "a"}}, `"A-B"`},
		{"empty env name", wire.BashRequest{Command: "true", Env: map[string]string{"": "a"}}, "env"},
		{"NUL in env value", wire.BashRequest{Command: "true", Env: map[string]string{"A": "x\x00y"}}, "A"},
		{"unknown user", wire.BashRequest{Command: "true", User: "no-such-user-xyz"}, "no-such-user-xyz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), tc.req)
			d := detail(err)
			if err == nil || d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, tc.want) {
				t.Fatalf("got %v (code %s), want bad_request naming %s", err, d.Code, tc.want)
			}
		})
	}
}

func TestMissingShellIsAnError(t *testing.T) {
	r := &Runner{Workspace: t.TempDir(), Shell: filepath.Join(t.TempDir(), "no-bash")}
	_, err := r.Run(context.Background(), wire.BashRequest{Command: "true"})
	if err == nil || detail(err).Code != wire.CodeInternal || !strings.Contains(err.Error(), "no-bash") {
		t.Fatalf("got %v", err)
	}
}

// detail is wire.DetailOf that tolerates a nil error, so that a missing
// error fails the test instead of panicking.
func detail(err error) wire.ErrorDetail {
	if err == nil {
		return wire.ErrorDetail{Message: "<nil>"}
	}
	return wire.DetailOf(err)
}

func TestIDMapped(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "uid_map")
	os.WriteFile(file, []byte("         0  268435456      65536\n"), 0o644)
	for id, want := range map[uint64]bool{0: true, 65534: true, 65535: true, 65536: false, 4294967294: false} {
		if got := idMapped(file, id); got != want {
			t.Errorf("idMapped(%d) = %v, want %v", id, got, want)
		}
	}
	os.WriteFile(file, []byte("0 0 4294967295\n"), 0o644)
	if !idMapped(file, 4294967294) {
		t.Error("the identity map does not map every id")
	}
}

// TestLargeCommandRunsWhole: a command of a megabyte (a heredoc writing a
// file, as agents do) runs whole, with $0, $LINENO and error lines as a
// script's, and a syntax error stops it where bash finds it.
func TestLargeCommandRunsWhole(t *testing.T) {
	r := &Runner{Workspace: t.TempDir()}
	body := strings.Repeat(strings.Repeat("y", 99)+"\n", 10000)
	cmd := "cat > big <<'EOF'\n" + body + "EOF\nwc -c < big; echo \"$0 $LINENO\"; no_such_command_x"
	res := run(t, r, wire.BashRequest{Command: cmd})
	if res.Stdout != "1000000\n/dev/fd/3 10003\n" || res.ExitCode != 127 || !strings.Contains(res.Stderr, "line 10003: no_such_command_x") {
		t.Fatalf("got stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	res = run(t, r, wire.BashRequest{Command: "echo before\nif then\necho after"})
	if res.Stdout != "before\n" || res.ExitCode != 2 || !strings.Contains(res.Stderr, "syntax error") {
		t.Fatalf("syntax error: %+v", res)
	}
}
