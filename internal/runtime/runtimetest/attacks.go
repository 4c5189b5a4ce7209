package runtimetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// Attacks runs every attack against b. Subtests share b and run one after
// another; each uses sandboxes of its own.
func Attacks(t *testing.T, b *Berth) {
	for _, a := range []struct {
		name string
		run  func(*testing.T, *Berth)
	}{
		{"control files and secrets stay out of reach", attackControlFiles},
		{"berth and its database are unreachable", attackBerthFromInside},
		{"sandboxes are invisible to each other", attackNeighbours},
		{"the host is read-only and mostly invisible", attackHost},
		{"the agent socket cannot be replaced", attackAgentSocket},
		{"no process outlives its server", attackSurvivors},
		{"orphaned processes are reaped", attackOrphans},
		{"a dead agent is noticed and restarted on request", attackKilledAgent},
		{"limits hold", attackLimits},
		{"a flood of output is capped", attackOutputFlood},
		{"commands run as other users", attackUsers},
		{"commands hold only their stdio", attackDescriptors},
	} {
		t.Run(a.name, func(t *testing.T) { a.run(t, b) })
	}
}

// fileState is what must not change about a file berth must not touch.
type fileState struct {
	content []byte
	mode    os.FileMode
	uid     uint32
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("secret file %s: %v", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("secret file %s: %v", path, err)
	}
	return fileState{content: b, mode: st.Mode(), uid: st.Sys().(*syscall.Stat_t).Uid}
}

// attackControlFiles plants symlinks to berth's secret files wherever the
// sandbox can write, under every name berth's control files ever had,
// then makes berth do everything it does to a sandbox's files: read its
// logs, reuse it (RESET), restart it and recreate its agent. The secret
// files must stay as they were and never show up in anything the sandbox
// or its owner gets back. Item 1 and 2 of issue 8.
func attackControlFiles(t *testing.T, b *Berth) {
	before := map[string]fileState{}
	for _, f := range b.SecretFiles {
		before[f] = stateOf(t, f)
		b.Secrets = append(b.Secrets, strings.TrimSpace(string(before[f].content)))
	}
	u := b.user(t, "mallory")
	sb := u.start(t, orchestrator.StartServerRequest{ServerName: "planter", RestartPolicy: orchestrator.RestartOnFailure})
	names := []string{"token", "agent.log", "agent.sock", "agent.pid", "sandbox.json", "uid-slot", "volume.img", "volume", "hmac.key"}
	var plant strings.Builder
	for _, target := range b.SecretFiles {
		for _, name := range names {
			for _, dir := range []string{".", "..", "/tmp", "/workspace/..", "/", "/run", "/dev/shm"} {
				fmt.Fprintf(&plant, "ln -sfn %q %q/%s 2>/dev/null; ", target, dir, name)
			}
		}
		// The target, read directly and through every process's root.
		fmt.Fprintf(&plant, "cat %q /proc/*/root%s 2>/dev/null; ", target, target)
	}
	sb.sh(t, plant.String()+"cat /proc/*/environ /proc/*/cmdline 2>/dev/null; true")

	ctx := context.Background()
	logs, err := b.Svc.ServerLogs(ctx, u.p, sb.id, 1000)
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	b.noSecrets(t, "get_server_logs", logs)
	// RESET reuse: finish, then start again with the same name.
	if _, err := b.Svc.FinishServer(ctx, u.p, orchestrator.ServerRef{ServerID: sb.id}); err != nil {
		t.Fatal(err)
	}
	again := u.start(t, orchestrator.StartServerRequest{ServerName: "planter", ReuseStrategy: orchestrator.ReuseReset, RestartPolicy: orchestrator.RestartOnFailure})
	if again.id != sb.id {
		t.Fatalf("RESET did not reuse the server")
	}
	// The agent dies: the restart policy recreates it over the planted
	// files.
	sb.oneShot(orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
	waitFor(t, "the server to be restarted", func() bool {
		srv := sb.server(t)
		return srv.Status == orchestrator.ServerRunning && srv.Restarts == 1
	})
	sb.sh(t, "cat agent.log token 2>/dev/null; true")
	// RESTART: the sandbox is deleted and made again.
	op, err := b.Svc.RestartServer(ctx, u.p, orchestrator.ServerRef{ServerID: sb.id}, deadline.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	startResult(t, op)
	if logs, err = b.Svc.ServerLogs(ctx, u.p, sb.id, 1000); err != nil {
		t.Fatalf("logs: %v", err)
	}
	b.noSecrets(t, "get_server_logs after restarts", logs)
	for f, was := range before {
		now := stateOf(t, f)
		if !bytes.Equal(now.content, was.content) || now.mode != was.mode || now.uid != was.uid {
			t.Fatalf("secret file %s changed: mode %v uid %d -> mode %v uid %d", f, was.mode, was.uid, now.mode, now.uid)
		}
	}
}

// attackBerthFromInside connects from a sandbox to berth's own listener
// (its OAuth development login would hand out an admin's token), its
// database and the loopback ports berth's host uses. Items 3 and 4.
func attackBerthFromInside(t *testing.T, b *Berth) {
	sb := b.user(t, "bob").start(t, orchestrator.StartServerRequest{})
	targets := []string{hostPort(b.URL), b.DatabaseAddr, "127.0.0.1:5432", "localhost:5432"}
	// The host as the sandbox's network sees it: its default gateway
	// (a pod's node), where a server listening on every address of the
	// host answers.
	if gw := strings.TrimSpace(sb.ok(t, gatewayScript)); gw != "" {
		for _, addr := range []string{hostPort(b.URL), b.DatabaseAddr} {
			_, port, _ := strings.Cut(addr, ":")
			targets = append(targets, gw+":"+port)
		}
	}
	for _, addr := range targets {
		host, port, _ := strings.Cut(addr, ":")
		res := sb.sh(t, fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && echo CONNECTED", host, port))
		if strings.Contains(res.Stdout, "CONNECTED") {
			t.Fatalf("the sandbox connected to %s", addr)
		}
	}
	// No process of berth's, nor its arguments, is visible.
	ps := sb.ok(t, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
	for _, word := range []string{"postgres", "berth serve", "database-url"} {
		if strings.Contains(ps, word) {
			t.Fatalf("the sandbox sees a host process (%q): %s", word, ps)
		}
	}
}

// gatewayScript prints the address of the sandbox's default gateway, or
// nothing, from /proc/net/route (hexadecimal, little-endian).
const gatewayScript = `while read -r iface dst gw _; do
  if [ "$dst" = 00000000 ] && [ "$gw" != 00000000 ]; then
    printf '%d.%d.%d.%d\n' 0x${gw:6:2} 0x${gw:4:2} 0x${gw:2:2} 0x${gw:0:2}; break
  fi
done < /proc/net/route`

func hostPort(url string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	s, _, _ = strings.Cut(s, "/")
	return s
}
