//go:build linux

package local_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/egresstest"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// egressHooks stand in for the orchestrator's side of the gateways: one
// policy for every sandbox, refusals kept.
type egressHooks struct {
	mu       sync.Mutex
	policy   egress.Policy
	refusals []egress.Refusal
}

func (h *egressHooks) hooks() runtime.EgressHooks {
	return runtime.EgressHooks{
		Server: func(context.Context, string) (egress.Policy, int64, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.policy, 0, nil
		},
		Refused: func(_ string, r egress.Refusal) {
			h.mu.Lock()
			h.refusals = append(h.refusals, r)
			h.mu.Unlock()
		},
		Allowed: func(string) {},
		Bytes:   func(context.Context, string, int64) error { return nil },
	}
}

func egressRuntime(t *testing.T, dir string, inet *egresstest.Internet, h *egressHooks) *local.Runtime {
	t.Helper()
	r, err := local.New(local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: "full", Limits: local.Limits{DiskBytes: orchtest.SandboxDisk},
		Egress: local.EgressOptions{Resolver: inet.Resolver(), Guard: &egress.Guard{Reachable: []netip.Prefix{inet.Prefix, inet.Prefix6}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.CarryEgress(h.hooks())
	return r
}

// TestEgressSurvivesRestart: a sandbox reaches the network through a
// gateway berth serves inside it; while no berth runs, its connections
// to the proxy are refused at once (nothing listens on its loopback);
// the next berth adopts it and serves its gateway again.
func TestEgressSurvivesRestart(t *testing.T) {
	inet := egresstest.Start(t)
	h := &egressHooks{policy: egress.Policy{Egress: egress.Public}}
	dir := dataDir(t)
	first := egressRuntime(t, dir, inet, h)
	ctx := context.Background()
	if err := first.Create(ctx, runtime.Spec{ServerID: "net", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Delete(context.Background(), "net") })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ep, err := first.WaitReady(waitCtx, "net")
	if err != nil {
		t.Fatal(err)
	}
	hello := "curl -sS --max-time 20 http://files.test/hello"
	if res := bash(t, ep, hello); res.ExitCode != 0 || res.Stdout != "hello from the test internet\n" {
		t.Fatalf("through the gateway: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	first.Close()
	if res := bash(t, ep, hello); res.ExitCode == 0 || !strings.Contains(res.Stderr, "onnect") {
		t.Fatalf("with no berth: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	second := egressRuntime(t, dir, inet, h)
	if res := bash(t, ep, hello); res.ExitCode != 0 {
		t.Fatalf("after the next berth adopted it: exit %d %q", res.ExitCode, res.Stderr)
	}
	// The policy is asked on every connection.
	h.mu.Lock()
	h.policy = egress.Policy{Egress: egress.None}
	h.mu.Unlock()
	if res := bash(t, ep, "curl -sS --fail-with-body http://files.test/hello"); res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, "policy none") {
		t.Fatalf("under none: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if err := second.Delete(ctx, "net"); err != nil {
		t.Fatal(err)
	}
}
