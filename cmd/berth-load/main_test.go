package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
)

var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// berth-load against a real berth (REST and MCP in front of real
// sandboxes) and a real bare agent: every surface measures rounds of
// both, interleaved, with no error, and prints the ratio.
func TestLoadAgainstBerthAndABareAgent(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	tok, _ := e.Token(t, "loader")
	authOpts := auth.MiddlewareOptions{Authenticators: []auth.Authenticator{e.Svc}, Realm: "berth"}
	base := orchtest.Serve(t, func(url string) http.Handler {
		hosts := hostguard.Options{PublicURL: url}
		mcpH := mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
		return api.NewServer(e.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpH})
	})
	for _, surface := range []string{"rest", "mcp", "oneshot"} {
		t.Run(surface, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"--url", base, "--surface", surface, "--callers", "2", "--servers", "2", "--count", "40",
				"--duration", "60s", "--rounds", "2", "--agent", agentBin, "--cpu", fmt.Sprintf("test=%d", os.Getpid())}, func(k string) string {
				if k == "BERTH_TOKEN" {
					return tok
				}
				return ""
			}, &out, &errOut)
			if err != nil {
				t.Fatalf("berth-load: %v\n%s%s", err, out.String(), errOut.String())
			}
			for _, want := range []string{"round 1 bare agent", "round 2 berth " + surface, "berth / bare agent: p50", "errors 0", "cpu per call: test "} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "first:") {
				t.Errorf("a call failed:\n%s", out.String())
			}
		})
	}
	// The servers it started are stopped with its client.
	clients, err := e.Svc.ListClients(context.Background(), mustPrincipal(t, e, tok))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if c.Status != orchestrator.ClientStopped {
			t.Errorf("client %s is %s after berth-load ended", c.ID, c.Status)
		}
	}
}

func mustPrincipal(t *testing.T, e *orchtest.Env, tok string) rbac.Principal {
	t.Helper()
	p, err := e.Svc.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad flags are refused, naming the flag.
func TestLoadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--callers 0":      "--callers",
		"--surface grpc":   "--surface",
		"--servers 9":      "--servers",
		"--rounds 0":       "--rounds",
		"--duration 0s":    "--duration",
		"--token= --url x": "--token",
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(strings.Fields(args), "--token=t"), func(string) string { return "" }, &out, &errOut)
		if want == "--token" {
			err = run(context.Background(), strings.Fields(args), func(string) string { return "" }, &out, &errOut)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", args, err, want)
		}
	}
}

// --cpu names processes as NAME=PID; anything else is refused with the
// flag's form, and a sample charges each its own time and its
// descendants' apart.
func TestCPUWatch(t *testing.T) {
	for _, bad := range []string{"berth", "=1", "berth=x", "berth=0", "a+b=1", "berth=1,"} {
		if _, err := parseCPUWatch(bad); err == nil {
			t.Errorf("--cpu %q accepted", bad)
		}
	}
	w, err := parseCPUWatch(fmt.Sprintf("me=%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	before, err := w.sample()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range w.keys() {
		if _, ok := before[k]; !ok {
			t.Errorf("sample lacks %q: %v", k, before)
		}
	}
	if _, err := (cpuWatch{names: []string{"gone"}, pids: []int{1 << 30}}).sample(); err == nil {
		t.Error("a process that does not exist was sampled")
	}
}
