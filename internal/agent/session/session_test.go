package session

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestStatePersists(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Options{Workspace: ws})
	first := run(t, m, "s1", `cd sub && export FOO=bar && plain=kept && declare -a arr=(x y) && greet() { echo "hi $1"; }`)
	if first.ExitCode != 0 || first.SessionReset {
		t.Fatalf("first call: %+v", first)
	}
	res := run(t, m, "s1", `pwd; echo "$FOO $plain ${arr[1]}"; greet you; bash -c 'echo child:$FOO'`)
	want := filepath.Join(ws, "sub") + "\nbar kept y\nhi you\nchild:bar\n"
	if res.Stdout != want || res.Stderr != "" || res.ExitCode != 0 || res.SessionReset {
		t.Fatalf("second call: %+v, want stdout %q", res, want)
	}
	info, ok := sessionInfo(m, "s1")
	if !ok || info.Cwd != filepath.Join(ws, "sub") || info.Calls != 2 || info.PID == 0 || info.Busy {
		t.Fatalf("info: %+v", info)
	}
	for _, ts := range []string{info.CreatedAt, info.LastUsed} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Fatalf("time %q: %v", ts, err)
		}
	}
}

func TestOutputExact(t *testing.T) {
	m := newTestManager(t, Options{})
	cases := []struct {
		cmd, stdout, stderr string
	}{
		{`printf abc`, "abc", ""},
		{`printf 'out\n'; printf err >&2`, "out\n", "err"},
		{`echo one; echo two >&2; echo three`, "one\nthree\n", "two\n"},
		{`:`, "", ""},
		{`printf '\n\n'`, "\n\n", ""},
		{`printf 'tab\there'`, "tab\there", ""},
		{"cat <<'EOF'\n$HOME stays literal\nEOF", "$HOME stays literal\n", ""},
		{"true\nnosuchcommand_zz", "", "line 2: nosuchcommand_zz: command not found\n"},
	}
	for _, c := range cases {
		res := run(t, m, "out", c.cmd)
		// Errors name the sourced command file, which differs per shell.
		if _, rest, ok := strings.Cut(res.Stderr, "/command: "); ok {
			res.Stderr = rest
		}
		if res.Stdout != c.stdout || res.Stderr != c.stderr {
			t.Errorf("%q: stdout %q stderr %q, want %q %q", c.cmd, res.Stdout, res.Stderr, c.stdout, c.stderr)
		}
	}
}

func TestExitCodes(t *testing.T) {
	m := newTestManager(t, Options{})
	cases := map[string]int{
		`true`:                                   0,
		`false`:                                  1,
		`(exit 42)`:                              42,
		`bash -c 'exit 7'`:                       7,
		`nosuchcommand_zz`:                       127,
		`echo x | grep -q y`:                     1,
		`sh -c 'kill -9 $$'`:                     137,
		`if then`:                                2, // a syntax error ends the call, not the shell
		`f() { return 9; }; f`:                   9,
		`false; true`:                            0,
		`true; (exit 255)`:                       255,
		`echo "$BASH_VERSION" >/dev/null; false`: 1,
	}
	for cmd, want := range cases {
		res := run(t, m, "codes", cmd)
		if res.ExitCode != want || res.TimedOut || res.SessionReset {
			t.Errorf("%q: %+v, want exit code %d", cmd, res, want)
		}
	}
}

func TestStdinIsDevNull(t *testing.T) {
	m := newTestManager(t, Options{})
	res := run(t, m, "in", `cat; read -r line; echo "read=$? cat done"`)
	if res.Stdout != "read=1 cat done\n" {
		t.Fatalf("got %+v", res)
	}
	if res := run(t, m, "in", `echo still here`); res.Stdout != "still here\n" {
		t.Fatalf("after reading stdin: %+v", res)
	}
}

// markerLike matches what end markers look like: 32 hex digits.
var markerLike = regexp.MustCompile(`[0-9a-f]{32}`)

func TestSpoofedMarkersAreOutput(t *testing.T) {
	m := newTestManager(t, Options{})
	fake := strings.Repeat("0123456789abcdef", 2)
	cmd := fmt.Sprintf(`printf '%s 0\n'; printf '%s' >&2; echo after; echo after-err >&2; (exit 5)`, fake, fake)
	res := run(t, m, "spoof", cmd)
	if res.Stdout != fake+" 0\nafter\n" || res.Stderr != fake+"after-err\n" || res.ExitCode != 5 {
		t.Fatalf("marker-looking output: %+v", res)
	}

	// A DEBUG trap logs every command the shell runs, the end-of-call
	// protocol included, which is how a command could learn an earlier
	// call's marker.
	log := filepath.Join(t.TempDir(), "trace")
	run(t, m, "spoof", fmt.Sprintf(`trap 'printf "%%s\n" "$BASH_COMMAND" >> %s' DEBUG`, log))
	run(t, m, "spoof", `echo call to learn from`)
	run(t, m, "spoof", `trap - DEBUG`)
	trace, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	// The protocol passes the marker as two halves; join the first pair.
	halves := regexp.MustCompile(`([0-9a-f]{16}) ([0-9a-f]{16})`).FindSubmatch(trace)
	if halves == nil {
		t.Fatalf("no marker halves in the trace:\n%s", trace)
	}
	if markerLike.Match(trace) {
		t.Fatalf("the trace holds a whole marker:\n%s", trace)
	}
	prev := string(halves[1]) + string(halves[2])
	cmd = fmt.Sprintf(`printf '%s 0\n'; printf '%s' >&2; printf '%s'; echo; echo tail; (exit 3)`, prev, prev, prev)
	res = run(t, m, "spoof", cmd)
	if res.Stdout != prev+" 0\n"+prev+"\ntail\n" || res.Stderr != prev || res.ExitCode != 3 {
		t.Fatalf("earlier marker: %+v", res)
	}
	if res := run(t, m, "spoof", `echo clean`); res.Stdout != "clean\n" || res.Stderr != "" {
		t.Fatalf("call after spoofing: %+v", res)
	}
}

func TestXtraceDoesNotLeakProtocol(t *testing.T) {
	m := newTestManager(t, Options{})
	run(t, m, "x", `set -x`)
	res := run(t, m, "x", `echo hi`)
	if res.Stdout != "hi\n" || res.Stderr != "++ echo hi\n" {
		t.Fatalf("traced call: %+v", res)
	}
	res = run(t, m, "x", `set +x; echo quiet`)
	if res.Stdout != "quiet\n" || res.Stderr != "++ set +x\n" {
		t.Fatalf("untrace call: %+v", res)
	}
}

func TestLargeOutputBounded(t *testing.T) {
	m := newTestManager(t, Options{})
	const total = 50 << 20
	res := runReq(t, m, "big", wire.SessionExecRequest{
		Command: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; head -c %d /dev/zero | tr '\0' b >&2; printf END`, total, total),
	})
	limit := int64(wire.DefaultMaxOutputBytes)
	if res.StdoutTruncatedBytes != total+3-limit || res.StderrTruncatedBytes != total-limit {
		t.Fatalf("truncated %d/%d", res.StdoutTruncatedBytes, res.StderrTruncatedBytes)
	}
	if len(res.Stdout) > int(limit)+100 || !strings.HasSuffix(res.Stdout, "aaaEND") || !strings.HasPrefix(res.Stdout, "aaa") {
		t.Fatalf("stdout %d bytes, tail %q", len(res.Stdout), res.Stdout[len(res.Stdout)-10:])
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit code %d", res.ExitCode)
	}
	small := runReq(t, m, "big", wire.SessionExecRequest{Command: `seq 1 1000`, MaxOutputBytes: wire.Int64(10)})
	if small.StdoutTruncatedBytes == 0 || !strings.HasPrefix(small.Stdout, "1\n2\n3") || !strings.HasSuffix(small.Stdout, "000\n") {
		t.Fatalf("small limit: %+v", small)
	}
	all := runReq(t, m, "big", wire.SessionExecRequest{Command: `head -c 3000000 /dev/zero`, MaxOutputBytes: wire.Null()})
	if len(all.Stdout) != 3000000 || all.StdoutTruncatedBytes != 0 {
		t.Fatalf("unlimited: %d bytes, %d truncated", len(all.Stdout), all.StdoutTruncatedBytes)
	}
}

func TestExitEndsShellAndNextCallResets(t *testing.T) {
	m := newTestManager(t, Options{})
	first := run(t, m, "ex", `X=1; echo $$`)
	pid := atoi(t, first.Stdout)
	res := run(t, m, "ex", `echo bye; exit 3`)
	if res.ExitCode != 3 || res.Stdout != "bye\n" || res.TimedOut || res.SessionReset {
		t.Fatalf("exit call: %+v", res)
	}
	waitGone(t, pid)
	res = run(t, m, "ex", `echo "${X-unset} $$"`)
	if !res.SessionReset || !strings.HasPrefix(res.Stdout, "unset ") || atoi(t, strings.Fields(res.Stdout)[1]) == pid {
		t.Fatalf("call after exit: %+v", res)
	}
	if res := run(t, m, "ex", `true`); res.SessionReset {
		t.Fatalf("third call reset again: %+v", res)
	}
}

func TestExitWithLingeringJobDoesNotHang(t *testing.T) {
	m := newTestManager(t, Options{})
	res := run(t, m, "linger", `sleep 1000 & echo $!; exit 4`)
	pid := atoi(t, res.Stdout)
	killLater(t, pid)
	if res.ExitCode != 4 {
		t.Fatalf("got %+v", res)
	}
	// The job outlived its shell; ending the dead shell ended it too.
	if alive(pid) {
		t.Fatal("the job of the exited shell still runs")
	}
	if res := run(t, m, "linger", `echo ok`); !res.SessionReset || res.Stdout != "ok\n" {
		t.Fatalf("next call: %+v", res)
	}
}

func TestKilledShellResets(t *testing.T) {
	m := newTestManager(t, Options{})
	pid := atoi(t, run(t, m, "k", `echo $$`).Stdout)
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to lose its shell", func() bool {
		info, _ := sessionInfo(m, "k")
		return info.PID == 0
	})
	res := run(t, m, "k", `echo again`)
	if !res.SessionReset || res.Stdout != "again\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestBadRequests(t *testing.T) {
	m := newTestManager(t, Options{})
	ctx := testCtx(t)
	for _, req := range []wire.SessionExecRequest{
		{Command: ""},
		{Command: "  \n"},
		{Command: "echo a\x00b"},
		{Command: "true", Timeout: -1},
		{Command: "true", MaxOutputBytes: wire.Int64(-5)},
	} {
		_, err := m.Exec(ctx, "ok", req)
		wantCode(t, err, wire.CodeBadRequest)
	}
	if len(m.List()) != 0 {
		t.Fatalf("bad requests created sessions: %+v", m.List())
	}
}

func TestIDs(t *testing.T) {
	m := newTestManager(t, Options{})
	ctx := testCtx(t)
	bad := []string{"", "A", "-a", "a-", "a_b", "a.b", "a b", "é", strings.Repeat("a", 64), "../x"}
	for _, id := range bad {
		err := ValidID(id)
		wantCode(t, err, wire.CodeBadRequest)
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
			t.Errorf("error %q does not name id %q", err, id)
		}
		_, err = m.Exec(ctx, id, wire.SessionExecRequest{Command: "true"})
		wantCode(t, err, wire.CodeBadRequest)
		wantCode(t, m.Delete(ctx, id), wire.CodeBadRequest)
	}
	for _, id := range []string{"a", "0", "a-b", "build-2", strings.Repeat("z", 63)} {
		if err := ValidID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	wantCode(t, m.Delete(ctx, "never-made"), wire.CodeNotFound)
}

func TestShellSettingsDoNotBreakProtocol(t *testing.T) {
	m := newTestManager(t, Options{})
	steps := []struct {
		cmd, stdout string
		code        int
	}{
		{`set -o noclobber -u; IFS=0; shopt -s failglob`, "", 0},
		{`(exit 10)`, "", 10},
		{`exec </etc/hostname; read -r line && echo read`, "read\n", 0},
		{`exec 2>/dev/null; echo err >&2; echo out`, "out\n", 0},
		{`exec >/dev/null; echo hidden`, "", 0},
		{`echo still hidden; (exit 4)`, "", 4},
	}
	for _, s := range steps {
		res := run(t, m, "settings", s.cmd)
		if res.Stdout != s.stdout || res.ExitCode != s.code || res.TimedOut || res.SessionReset {
			t.Fatalf("%q: %+v", s.cmd, res)
		}
	}
}

func TestLateJobOutputGoesToNextCall(t *testing.T) {
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	res := run(t, m, "late", fmt.Sprintf(`(until [ -e %[1]s/go ]; do sleep 0.01; done; echo late; touch %[1]s/done) & echo started`, dir))
	if res.Stdout != "started\n" {
		t.Fatalf("got %+v", res)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to print", func() bool { _, err := os.Stat(filepath.Join(dir, "done")); return err == nil })
	if res := run(t, m, "late", `echo now`); res.Stdout != "late\nnow\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestMissingWorkspace(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "gone")
	m := newTestManager(t, Options{Workspace: ws})
	_, err := m.Exec(testCtx(t), "ws", wire.SessionExecRequest{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), ws) {
		t.Fatalf("want an error naming %s, got %v", ws, err)
	}
}

func TestBackgroundOutputNeverBlocks(t *testing.T) {
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	// Far more than the pipe and the reader hold: the job finishes only
	// if the output is drained while no call runs.
	const size = 8 << 20
	run(t, m, "bgout", fmt.Sprintf(`(head -c %d /dev/zero | tr '\0' x; echo; echo tail; touch %s/done) &`, size, dir))
	waitFor(t, "the job to finish printing", func() bool { _, err := os.Stat(filepath.Join(dir, "done")); return err == nil })
	res := run(t, m, "bgout", `echo now`)
	if !strings.HasSuffix(res.Stdout, "xxx\ntail\nnow\n") || res.StdoutTruncatedBytes == 0 {
		t.Fatalf("stdout ends %q, %d bytes truncated", res.Stdout[max(0, len(res.Stdout)-20):], res.StdoutTruncatedBytes)
	}
	if got := int64(len(res.Stdout)) + res.StdoutTruncatedBytes; got < size || got > size+200 {
		t.Fatalf("kept %d + truncated %d bytes of %d", len(res.Stdout), res.StdoutTruncatedBytes, size)
	}
}

// TestUnsetEndFunctionCostsOnlyTheSession: a command that removes the
// function ending each call gets no end markers; the call ends by its
// timeout, and the next call runs in a fresh shell.
func TestUnsetEndFunctionCostsOnlyTheSession(t *testing.T) {
	m := newTestManager(t, Options{})
	run(t, m, "unset", "x=kept")
	res := runReq(t, m, "unset", wire.SessionExecRequest{Command: "unset -f " + endFunc + "; echo gone", Timeout: 1})
	if !res.TimedOut || res.ExitCode != timeoutExitCode || !strings.HasPrefix(res.Stdout, "gone\n") {
		t.Fatalf("call without the end function: %+v", res)
	}
	res = run(t, m, "unset", `echo "${x-unset}"`)
	if !res.SessionReset || res.Stdout != "unset\n" || res.ExitCode != 0 {
		t.Fatalf("next call: %+v", res)
	}
}

// TestCommandFilesInMemory: where /dev/shm is a writable tmpfs, a shell's
// per-call files live there, off the disk's journal.
func TestCommandFilesInMemory(t *testing.T) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &st); err != nil || st.Type != 0x01021994 || syscall.Access(shmDir, 2) != nil {
		t.Skipf("%s is not a writable tmpfs here", shmDir)
	}
	m := newTestManager(t, Options{})
	run(t, m, "shm", "true")
	var dirs []string
	m.mu.Lock()
	for _, s := range m.sessions {
		s.mu.Lock()
		dirs = append(dirs, s.sh.dir)
		s.mu.Unlock()
	}
	m.mu.Unlock()
	if len(dirs) != 1 || !strings.HasPrefix(dirs[0], shmDir+"/berth-session-") {
		t.Fatalf("command directories %q, want one under %s", dirs, shmDir)
	}
}
