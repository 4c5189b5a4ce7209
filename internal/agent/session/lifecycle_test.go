package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestTimeoutKillsCommandKeepsShell(t *testing.T) {
	m := newTestManager(t, Options{})
	shellPID := atoi(t, run(t, m, "to", `X=kept; echo $$`).Stdout)
	res := runReq(t, m, "to", wire.SessionExecRequest{
		Command: `sleep 1000 & echo $!; bash -c 'sleep 1000 & echo $!; wait' & sleep 1000 | cat; echo not reached`,
		Timeout: 0.3,
	})
	if !res.TimedOut || res.ExitCode != 124 || strings.Contains(res.Stdout, "not reached") {
		t.Fatalf("got %+v", res)
	}
	pids := strings.Fields(res.Stdout)
	if len(pids) != 2 {
		t.Fatalf("want two pids, got %q", res.Stdout)
	}
	for _, p := range pids {
		waitGone(t, atoi(t, p))
	}
	if !alive(shellPID) {
		t.Fatal("the shell died with the command")
	}
	res = run(t, m, "to", `echo "$X $$"`)
	if res.SessionReset || res.Stdout != fmt.Sprintf("kept %d\n", shellPID) {
		t.Fatalf("call after timeout: %+v", res)
	}
}

func TestTimeoutSparesOlderJobs(t *testing.T) {
	m := newTestManager(t, Options{})
	bg := atoi(t, run(t, m, "jobs", `sleep 1000 >/dev/null 2>&1 & echo $!`).Stdout)
	res := runReq(t, m, "jobs", wire.SessionExecRequest{Command: `sleep 1000; echo not reached`, Timeout: 0.3})
	if !alive(bg) {
		t.Fatal("a background job of an earlier call was killed")
	}
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "" {
		t.Fatalf("got %+v", res)
	}
	if !alive(bg) {
		t.Fatal("a background job of an earlier call was killed")
	}
	if err := m.Delete(testCtx(t), "jobs"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, bg)
}

func TestTimeoutOfBuiltinLoopKeepsShell(t *testing.T) {
	m := newTestManager(t, Options{})
	run(t, m, "loop", `X=1`)
	for _, cmd := range []string{
		`echo start; while :; do :; done; echo not reached`,
		`echo start; for ((;;)); do while :; do :; done; done; echo not reached`,
	} {
		res := runReq(t, m, "loop", wire.SessionExecRequest{Command: cmd, Timeout: 0.2})
		if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "start\n" {
			t.Fatalf("%q: %+v", cmd, res)
		}
	}
	if res := run(t, m, "loop", `echo "${X-unset}"`); res.SessionReset || res.Stdout != "1\n" {
		t.Fatalf("call after: %+v", res)
	}
}

func TestTimeoutOutOfReachLosesShell(t *testing.T) {
	m := newTestManager(t, Options{})
	run(t, m, "lost", `X=1`)
	// The interrupt leaves only the loop inside f, and the outer loop
	// calls f again: only killing the shell ends this.
	res := runReq(t, m, "lost", wire.SessionExecRequest{
		Command: `f() { while :; do :; done; }; echo start; while :; do f; done`,
		Timeout: 0.2,
	})
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "start\n" {
		t.Fatalf("got %+v", res)
	}
	res = run(t, m, "lost", `echo "${X-unset}"`)
	if !res.SessionReset || res.Stdout != "unset\n" {
		t.Fatalf("call after a lost shell: %+v", res)
	}
}

func TestTimeoutInterruptsWaitOnOldJob(t *testing.T) {
	m := newTestManager(t, Options{})
	bg := atoi(t, run(t, m, "w", `Y=2; sleep 1000 >/dev/null & echo $!`).Stdout)
	res := runReq(t, m, "w", wire.SessionExecRequest{Command: `wait; echo not reached`, Timeout: 0.2})
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "" {
		t.Fatalf("got %+v", res)
	}
	if !alive(bg) {
		t.Fatal("the job waited for was killed")
	}
	if res := run(t, m, "w", `echo $Y; kill %1`); res.SessionReset || res.Stdout != "2\n" {
		t.Fatalf("call after: %+v", res)
	}
	waitGone(t, bg)
}

func TestTimeoutLimits(t *testing.T) {
	m := newTestManager(t, Options{DefaultTimeout: 200 * time.Millisecond, MaxTimeout: 300 * time.Millisecond})
	for _, timeout := range []float64{0, wire.MaxSessionTimeoutSeconds} {
		res := runReq(t, m, "lim", wire.SessionExecRequest{Command: `sleep 1000`, Timeout: timeout})
		if !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("timeout %v: %+v", timeout, res)
		}
	}
}

func TestCancelKillsCommand(t *testing.T) {
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	run(t, m, "c", `Z=3`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "c", wire.SessionExecRequest{Command: fmt.Sprintf(`sleep 1000 & echo $! > %s.tmp; mv %s.tmp %s; wait`, pidFile, pidFile, pidFile)})
		errc <- err
	}()
	var pid int
	waitFor(t, "the command to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			pid = atoi(t, string(b))
		}
		return err == nil
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	waitGone(t, pid)
	if res := run(t, m, "c", `echo $Z`); res.Stdout != "3\n" || res.SessionReset {
		t.Fatalf("call after cancel: %+v", res)
	}
}

func TestCallsOnOneSessionSerialize(t *testing.T) {
	m := newTestManager(t, Options{})
	log := filepath.Join(t.TempDir(), "log")
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, tag := range []string{"A", "B"} {
		wg.Go(func() {
			<-start
			cmd := fmt.Sprintf(`for i in $(seq 1 20); do echo %s$i >> %s; sleep 0.005; done`, tag, log)
			if _, err := m.Exec(testCtx(t), "serial", wire.SessionExecRequest{Command: cmd}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 40 {
		t.Fatalf("got %d lines", len(lines))
	}
	for i, l := range lines {
		if l[0] != lines[i/20*20][0] {
			t.Fatalf("calls interleaved: %v", lines)
		}
	}
	if info, _ := sessionInfo(m, "serial"); info.Calls != 2 {
		t.Fatalf("info: %+v", info)
	}
}

func TestWaitingCallHonoursContext(t *testing.T) {
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	gate, started := filepath.Join(dir, "gate"), filepath.Join(dir, "started")
	done := make(chan wire.BashResult, 1)
	go func() {
		res, err := m.Exec(testCtx(t), "q", wire.SessionExecRequest{
			Command: fmt.Sprintf(`touch %s; until [ -e %s ]; do sleep 0.01; done; echo first`, started, gate),
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the first call to start", func() bool { _, err := os.Stat(started); return err == nil })
	if info, _ := sessionInfo(m, "q"); !info.Busy {
		t.Fatalf("running session not busy: %+v", info)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Exec(ctx, "q", wire.SessionExecRequest{Command: "echo second"}); !isCtxErr(err) {
		t.Fatalf("waiting call: want a context error, got %v", err)
	}
	os.WriteFile(gate, nil, 0o644)
	if res := <-done; res.Stdout != "first\n" {
		t.Fatalf("first call: %+v", res)
	}
	if res := run(t, m, "q", "echo third"); res.Stdout != "third\n" {
		t.Fatalf("third call: %+v", res)
	}
}

func TestSessionsRunInParallel(t *testing.T) {
	m := newTestManager(t, Options{})
	dir := t.TempDir()
	// Each session announces itself and waits for the other: both can
	// only finish if they run at the same time.
	rendezvous := func(me, other string) string {
		return fmt.Sprintf(`touch %s/%s; for i in $(seq 1 1500); do [ -e %s/%s ] && echo met && exit 0; sleep 0.01; done; echo alone`, dir, me, dir, other)
	}
	var wg sync.WaitGroup
	results := make([]wire.BashResult, 2)
	for i, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Go(func() {
			res, err := m.Exec(testCtx(t), "par-"+pair[0], wire.SessionExecRequest{Command: "(" + rendezvous(pair[0], pair[1]) + ")"})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	for _, res := range results {
		if res.Stdout != "met\n" {
			t.Fatalf("sessions did not run together: %+v", results)
		}
	}
}

func TestIdleReaping(t *testing.T) {
	m := newTestManager(t, Options{IdleTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	pid1 := atoi(t, run(t, m, "idle-1", `echo $$`).Stdout)
	pid2 := atoi(t, run(t, m, "idle-2", `echo $$`).Stdout)
	waitFor(t, "idle sessions to be reaped", func() bool { return len(m.List()) == 0 })
	waitGone(t, pid1)
	waitGone(t, pid2)
	// The manager keeps working after reaping.
	if res := run(t, m, "idle-1", `echo back`); res.Stdout != "back\n" {
		t.Fatalf("got %+v", res)
	}
}

func TestRunEndsSessionsWhenCancelled(t *testing.T) {
	m := newTestManager(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx) }()
	pid := atoi(t, run(t, m, "r", `echo $$`).Stdout)
	cancel()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(m.List()) != 0 {
		t.Fatalf("sessions left: %+v", m.List())
	}
	waitGone(t, pid)
}

func TestDeleteBusySession(t *testing.T) {
	m := newTestManager(t, Options{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	shellPID := atoi(t, run(t, m, "busy", `echo $$`).Stdout)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Exec(testCtx(t), "busy", wire.SessionExecRequest{
			Command: fmt.Sprintf(`sleep 1000 & echo $! > %s.tmp; mv %s.tmp %s; wait`, pidFile, pidFile, pidFile),
		})
		errc <- err
	}()
	var pid int
	waitFor(t, "the command to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			pid = atoi(t, string(b))
		}
		return err == nil
	})
	if err := m.Delete(testCtx(t), "busy"); err != nil {
		t.Fatal(err)
	}
	if alive(pid) || alive(shellPID) {
		t.Fatalf("processes left after Delete: sleep %v shell %v", alive(pid), alive(shellPID))
	}
	wantCode(t, <-errc, wire.CodeConflict)
	wantCode(t, m.Delete(testCtx(t), "busy"), wire.CodeNotFound)
}

func TestResetAndClose(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	m := NewManager(Options{Workspace: t.TempDir()})
	defer m.Close()
	var pids []int
	dir := t.TempDir()
	for _, id := range []string{"c1", "c2"} {
		// A job, a job's child, a new session (setsid forks as a group
		// leader) and a double fork, each telling its own pid.
		cmd := fmt.Sprintf(`echo $$; sleep 1000 >/dev/null 2>&1 & echo $!; (sleep 1000 & echo $!; wait) & `+
			`setsid bash -c 'echo $$ > %[1]s/%[2]s-setsid; exec sleep 1000' >/dev/null 2>&1 & `+
			`(bash -c 'echo $$ > %[1]s/%[2]s-orphan; exec sleep 1000' >/dev/null 2>&1 &) ; `+
			`until [ -s %[1]s/%[2]s-setsid ] && [ -s %[1]s/%[2]s-orphan ]; do sleep 0.01; done; cat %[1]s/%[2]s-*`, dir, id)
		res := run(t, m, id, cmd)
		fields := strings.Fields(res.Stdout)
		if len(fields) != 5 {
			t.Fatalf("want 5 pids, got %+v", res)
		}
		for _, f := range fields {
			pids = append(pids, atoi(t, f))
		}
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d not running before Reset", pid)
		}
	}
	if err := m.Reset(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if len(m.List()) != 0 {
		t.Fatalf("sessions after Reset: %+v", m.List())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d alive after Reset", pid)
		}
	}
	pid := atoi(t, run(t, m, "c1", `echo $$`).Stdout)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatal("shell alive after Close")
	}
	_, err := m.Exec(testCtx(t), "c1", wire.SessionExecRequest{Command: "true"})
	wantCode(t, err, wire.CodeUnavailable)
	waitFor(t, "the session goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
}
