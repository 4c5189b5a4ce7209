package runtimetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
)

// detach leaves processes behind the way a script would to outlive its
// server: setsid, nohup, a double fork, a daemon listening on loopback.
const detach = `setsid sleep 1000 >/dev/null 2>&1 < /dev/null &
nohup sleep 1001 >/dev/null 2>&1 < /dev/null &
( ( sleep 1002 >/dev/null 2>&1 < /dev/null & ) & )
setsid python3 -m http.server --bind 127.0.0.1 18124 >/dev/null 2>&1 < /dev/null &
disown -a; true`

// attackSurvivors leaves processes behind and stops the server, then
// kills an agent under other leftovers: nothing may go on running as the
// sandbox's uids, nor in its PID namespace (which no process can leave),
// whatever uid it runs as (on Kubernetes every sandbox has the same).
// Item 8.
func attackSurvivors(t *testing.T, b *Berth) {
	u := b.user(t, "lingerer")
	stopped := u.start(t, orchestrator.StartServerRequest{ServerName: "stopped"})
	first, n, ok := stopped.hostIDs(t)
	ns := stopped.pidNamespace(t)
	stopped.ok(t, detach)
	if _, err := b.Svc.StopServer(context.Background(), u.p, orchestrator.ServerRef{ServerID: stopped.id}); err != nil {
		t.Fatal(err)
	}
	if ok && b.HostProcesses != nil {
		noProcesses(t, b, first, n, "after stop_server")
	}
	noneIn(t, ns, "after stop_server")

	crashed := u.start(t, orchestrator.StartServerRequest{ServerName: "crashed"})
	first, n, ok = crashed.hostIDs(t)
	ns = crashed.pidNamespace(t)
	crashed.ok(t, detach)
	crashed.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
	waitFor(t, "the server of the killed agent to fail", func() bool { return crashed.server(t).Status == orchestrator.ServerFailed })
	if ok && b.HostProcesses != nil {
		noProcesses(t, b, first, n, "after its agent was killed")
	}
	noneIn(t, ns, "after its agent was killed")
}

// pidNamespace is the sandbox's PID namespace as the host names it
// (pid:[inode]). A sandbox in the host's own fails the test.
func (s sandbox) pidNamespace(t *testing.T) string {
	t.Helper()
	ns := strings.TrimSpace(s.ok(t, "readlink /proc/self/ns/pid"))
	if own, err := os.Readlink("/proc/self/ns/pid"); err != nil || own == ns || !strings.HasPrefix(ns, "pid:[") {
		t.Fatalf("the sandbox's PID namespace is %q, the host's %q (%v)", ns, own, err)
	}
	return ns
}

// noneIn waits until no host process is in the PID namespace ns.
func noneIn(t *testing.T, ns, when string) {
	t.Helper()
	var left []string
	waitFor(t, fmt.Sprintf("the sandbox's processes to be gone %s", when), func() bool {
		left = left[:0]
		links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
		for _, l := range links {
			if got, err := os.Readlink(l); err == nil && got == ns {
				left = append(left, l)
			}
		}
		return len(left) == 0
	})
}

// attackOrphans leaves short-lived processes orphaned, as detached
// commands do: whatever is pid 1 of the sandbox must reap them, or their
// zombies pile up until the sandbox can start no process at all (its
// process limit counts them). On Kubernetes the agent was pid 1 and
// reaped nothing.
func attackOrphans(t *testing.T, b *Berth) {
	sb := b.user(t, "orphaner").start(t, orchestrator.StartServerRequest{})
	sb.ok(t, "for i in $(seq 1 20); do setsid sleep 0.01 >/dev/null 2>&1 </dev/null & done; disown -a; true")
	var ps string
	waitFor(t, "the orphans to be reaped", func() bool {
		ps = sb.ok(t, "ps -eo stat=,args=")
		for line := range strings.Lines(ps) {
			if strings.HasPrefix(strings.TrimSpace(line), "Z") {
				return false
			}
		}
		return true
	})
}

func noProcesses(t *testing.T, b *Berth, first, n int, when string) {
	t.Helper()
	var left []int
	waitFor(t, fmt.Sprintf("the sandbox's processes to be gone %s", when), func() bool {
		var err error
		if left, err = b.HostProcesses(first, n); err != nil {
			t.Fatal(err)
		}
		return len(left) == 0
	})
}

// attackKilledAgent kills the agent from inside: berth must notice within
// moments, say why, and restart it when the server asked for that,
// keeping its files. Item 12.
func attackKilledAgent(t *testing.T, b *Berth) {
	u := b.user(t, "crasher")
	plain := u.start(t, orchestrator.StartServerRequest{ServerName: "plain"})
	plain.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
	waitFor(t, "the server of the killed agent to be FAILED", func() bool { return plain.server(t).Status == orchestrator.ServerFailed })
	if msg := plain.server(t).Error; !strings.Contains(msg, "signal") {
		t.Fatalf("the failed server says %q, want how its agent ended", msg)
	}
	// Its events say what happened, newest first: berth found it
	// failed, after it started it for its owner.
	evs := plain.events(t)
	if len(evs) < 3 || evs[0].Reason != "server.failed" || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, "signal") ||
		!slices.ContainsFunc(evs, func(e runtime.Event) bool {
			return e.Reason == "server.start" && strings.Contains(e.Message, "crasher")
		}) ||
		!slices.ContainsFunc(evs, func(e runtime.Event) bool {
			return e.Reason == "start_server" && strings.Contains(e.Message, "SUCCEEDED")
		}) {
		t.Fatalf("the failed server's events %+v: want its failure first, its start and its start operation", evs)
	}

	kept := u.start(t, orchestrator.StartServerRequest{ServerName: "kept", RestartPolicy: orchestrator.RestartOnFailure})
	kept.ok(t, "echo survived > kept.txt")
	kept.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
	waitFor(t, "the server to be restarted", func() bool {
		srv := kept.server(t)
		return srv.Status == orchestrator.ServerRunning && srv.Restarts == 1
	})
	if b.RestartLosesFiles {
		if got := kept.sh(t, "cat kept.txt"); got.ExitCode == 0 {
			t.Fatalf("the runtime says a restart loses the workspace, but it holds %q", got.Stdout)
		}
	} else if got := kept.ok(t, "cat kept.txt"); got != "survived\n" {
		t.Fatalf("after the restart the workspace holds %q", got)
	}
	if evs := kept.events(t); !slices.ContainsFunc(evs, func(e runtime.Event) bool {
		return e.Reason == "recover_server" && strings.Contains(e.Message, "SUCCEEDED")
	}) ||
		!slices.ContainsFunc(evs, func(e runtime.Event) bool {
			return e.Reason == "server.failed" && strings.Contains(e.Message, "restarting it")
		}) {
		t.Fatalf("the restarted server's events %+v: want its failure and its recovery", evs)
	}
	// A crash loop ends FAILED once the restarts are used up.
	for i := 2; ; i++ {
		kept.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
		var srv orchestrator.Server
		waitFor(t, "the next restart or the end", func() bool {
			srv = kept.server(t)
			return srv.Status == orchestrator.ServerFailed || (srv.Status == orchestrator.ServerRunning && srv.Restarts == i)
		})
		if srv.Status == orchestrator.ServerFailed {
			if !strings.Contains(srv.Error, "not restarted again") {
				t.Fatalf("the crash-looping server says %q", srv.Error)
			}
			return
		}
		if i > 10 {
			t.Fatalf("restarted %d times and counting", i)
		}
	}
}
