// Package runtimetest holds the tests every runtime must pass, run from
// inside real sandboxes started through a real berth. Attacks is the part
// that does not depend on the runtime: each subtest is something a
// hostile sandbox would try against berth, its database, the host or
// another user's sandbox, and asserts that it fails and leaves the host
// and berth as they were. A runtime's own test builds a Berth on it and
// calls Attacks.
package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// Berth is a running berth to attack, with the facts an attacker goes
// after.
type Berth struct {
	Svc     *orchestrator.Service
	Runtime runtime.Runtime
	// Image is the image tag sandboxes start from.
	Image string
	// WritableRoot says sandboxes of Image may write their root
	// filesystem (an OCI image's, over a writable upper of their own):
	// the attacks then check that the writes stay in the sandbox instead
	// of that they fail.
	WritableRoot bool
	// URL is berth's own HTTP listener (REST, MCP, OAuth with its
	// development login), as the host reaches it.
	URL string
	// DatabaseAddr is host:port of berth's PostgreSQL.
	DatabaseAddr string
	// Secrets are strings no sandbox may ever see: the server key, the
	// database URL, tokens.
	Secrets []string
	// SecretFiles are host files no sandbox may read or change, nor make
	// berth read or change for it (berth's key file, a root-only file).
	SecretFiles []string
	// The limits sandboxes were given: the limit attacks go past them.
	MemoryBytes, DiskBytes, TmpBytes, Pids int64
	// MaxOutputBytes is what berth keeps of each output stream at most.
	MaxOutputBytes int64
	// HostProcesses lists the host pids running as any of the n host uids
	// from first on (a sandbox's id block, from its uid_map).
	HostProcesses func(first, n int) ([]int, error)

	// What a runtime does differently, each for the reason given; the
	// zero values are the local runtime's. An attack a difference makes
	// moot checks what holds instead; none is skipped.

	// ImageRoot: a sandbox's root filesystem is its image's
	// (Kubernetes), whose /root, /home and /var are its own; that the
	// host's stay out of sight is checked with marker files put there.
	ImageRoot bool
	// OneUser: a sandbox runs everything as one non-root uid with no way
	// to switch (Kubernetes: the pod's runAsUser, no capabilities), so a
	// command as another user is refused, never run as someone else.
	OneUser bool
	// RestartLosesFiles: a sandbox recreated after its agent died starts
	// with an empty workspace (Kubernetes: the workspace is an emptyDir,
	// which goes with its pod).
	RestartLosesFiles bool
	// DiskLimitEvicts: a sandbox that writes past its workspace's or
	// /tmp's size is stopped, its server FAILED saying why (Kubernetes:
	// the kubelet evicts a pod past an emptyDir's sizeLimit), where the
	// local runtime's volumes refuse the write (ENOSPC).
	DiskLimitEvicts bool
	// ShmBytes is the size of /dev/shm (default TmpBytes).
	ShmBytes int64
}

// deadline bounds every wait: generous, for a loaded 2-core machine.
const deadline = 60 * time.Second

// user is a berth user the attacks act as.
type user struct {
	b *Berth
	p rbac.Principal
}

func (b *Berth) user(t *testing.T, name string) user {
	t.Helper()
	ctx := context.Background()
	tok, _, err := b.Svc.CreateToken(ctx, orchestrator.CreateTokenRequest{Username: name, Name: "attack"})
	if err != nil {
		t.Fatalf("token for %s: %v", name, err)
	}
	p, err := b.Svc.Authenticate(ctx, tok)
	if err != nil {
		t.Fatalf("authenticate %s: %v", name, err)
	}
	b.Secrets = append(b.Secrets, tok)
	return user{b: b, p: p}
}

// sandbox is one server of a user.
type sandbox struct {
	u  user
	id string
}

// start starts a server and waits until it runs.
func (u user) start(t *testing.T, req orchestrator.StartServerRequest) sandbox {
	t.Helper()
	sb, op, err := u.tryStart(t, req)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	if sb.id == "" {
		startResult(t, op) // fails, saying how the start ended
	}
	return sb
}

// tryStart starts a server and waits for the start to end, whatever its
// outcome; a server that runs is stopped when the test ends.
func (u user) tryStart(t *testing.T, req orchestrator.StartServerRequest) (sandbox, orchestrator.Operation, error) {
	t.Helper()
	ctx := context.Background()
	if req.ClientID == "" {
		c, err := u.b.Svc.RegisterClient(ctx, u.p, orchestrator.RegisterClientRequest{Name: "attacker"})
		if err != nil {
			t.Fatalf("register client: %v", err)
		}
		req.ClientID = c.ID
	}
	if req.ImageTag == "" {
		req.ImageTag = u.b.Image
	}
	req.WaitSeconds = deadline.Seconds()
	op, err := u.b.Svc.StartServer(ctx, u.p, req)
	if err != nil || op.Status != orchestrator.OpSucceeded {
		return sandbox{}, op, err
	}
	sb := sandbox{u: u, id: startResult(t, op).ServerID}
	t.Cleanup(func() { u.b.Svc.StopServer(context.Background(), u.p, orchestrator.ServerRef{ServerID: sb.id}) })
	return sb, op, nil
}

func startResult(t *testing.T, op orchestrator.Operation) orchestrator.StartServerResult {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("start operation %s is %s (%s), want SUCCEEDED", op.ID, op.Status, op.Error)
	}
	var res orchestrator.StartServerResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("start result %s: %v", op.Result, err)
	}
	return res
}

// sh runs a command in the sandbox's persistent session and returns its
// result, whatever its exit status.
func (s sandbox) sh(t *testing.T, command string) wire.BashResult {
	t.Helper()
	res, err := s.u.b.Svc.SessionExec(context.Background(), s.u.p, s.id, "attack", wire.SessionExecRequest{Command: command, Timeout: deadline.Seconds()})
	if err != nil {
		t.Fatalf("in sandbox %s: %q: %v", s.id, command, err)
	}
	s.u.b.noSecrets(t, command, res.Stdout+res.Stderr)
	return res
}

// ok runs a command that must succeed and returns its stdout.
func (s sandbox) ok(t *testing.T, command string) string {
	t.Helper()
	res := s.sh(t, command)
	if res.ExitCode != 0 {
		t.Fatalf("in sandbox %s: %q exited %d: %s%s", s.id, command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// oneShot runs a command through run_bash_command.
func (s sandbox) oneShot(req orchestrator.RunBashRequest) (orchestrator.Operation, error) {
	req.ServerID = s.id
	req.WaitSeconds = deadline.Seconds()
	return s.u.b.Svc.RunBashCommand(context.Background(), s.u.p, req)
}

// server reads the sandbox's server record.
// events are the server's recent events, newest first.
func (s sandbox) events(t *testing.T) []runtime.Event {
	t.Helper()
	srv, err := s.u.b.Svc.GetServer(context.Background(), s.u.p, s.id)
	if err != nil {
		t.Fatalf("get server %s: %v", s.id, err)
	}
	return srv.Events
}

func (s sandbox) server(t *testing.T) orchestrator.Server {
	t.Helper()
	srv, err := s.u.b.Svc.GetServer(context.Background(), s.u.p, s.id)
	if err != nil {
		t.Fatalf("get server %s: %v", s.id, err)
	}
	return srv.Server
}

// hostIDs returns the first host uid of the sandbox's id block and its
// size, from its uid_map; ok is false without a user namespace.
func (s sandbox) hostIDs(t *testing.T) (first, n int, ok bool) {
	t.Helper()
	var inside int
	line := strings.TrimSpace(s.ok(t, "cat /proc/self/uid_map"))
	if _, err := fmt.Sscan(line, &inside, &first, &n); err != nil {
		t.Fatalf("uid_map %q: %v", line, err)
	}
	return first, n, !(inside == 0 && first == 0 && n == 4294967295)
}

// noSecrets fails the test when text contains any of berth's secrets.
func (b *Berth) noSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range b.Secrets {
		if s != "" && strings.Contains(text, s) {
			t.Fatalf("a secret of berth's reached the sandbox through %q", what)
		}
	}
}

// waitFor checks cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
