package orchestrator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// upstreamServer starts a server of the upstream image declaring ups.
func upstreamServer(t *testing.T, ups ...orchestrator.MCPUpstream) (*orchtest.Env, rbac.Principal, string) {
	t.Helper()
	e := newService(t, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "upstreams")
	image := e.UpstreamImage(t)
	return e, alice, startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: image, MCPUpstreams: ups}).ServerID
}

// startUpstream starts the test upstream in the sandbox in its own
// session, so that it outlives the command that started it.
func startUpstream(t *testing.T, svc *orchestrator.Service, p rbac.Principal, id, mode, addr string) {
	t.Helper()
	res := bash(t, svc, p, id, orchtest.UpstreamCommand(mode, addr), nil)
	if res.ExitCode != 0 {
		t.Fatalf("start the %s upstream: %+v", mode, res)
	}
}

// waitTools lists the server's MCP tools until ok accepts them.
func waitTools(t *testing.T, svc *orchestrator.Service, p rbac.Principal, id, what string, ok func([]string) bool) []string {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		tools, err := svc.ListServerTools(context.Background(), p, orchestrator.ServerToolsRequest{ServerID: id})
		if err != nil {
			t.Fatalf("list_server_mcp_tools: %v", err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if ok(names) {
			return names
		}
		if time.Now().After(end) {
			t.Fatalf("waited for %s; the server lists %q", what, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func callText(t *testing.T, svc *orchestrator.Service, p rbac.Principal, id, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := svc.CallServerTool(context.Background(), p, orchestrator.CallServerToolRequest{ServerID: id, ToolName: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return orchtest.ToolText(res.Content), res.IsError
}

// TestUpstreamToolsListedAndCalled: an MCP server started inside a real
// sandbox and declared at start_server is listed as <name>_<tool> and
// called through the service; a tool whose exposed name is a built-in's
// does not shadow it, and names no client may call are not listed.
func TestUpstreamToolsListedAndCalled(t *testing.T) {
	// One server under two names: as "read" its tool "file" would be
	// read_file.
	e, alice, id := upstreamServer(t, orchestrator.MCPUpstream{Name: "tools", URL: "http://127.0.0.1:9000/mcp"},
		orchestrator.MCPUpstream{Name: "read", URL: "http://127.0.0.1:9000/mcp"})
	startUpstream(t, e.Svc, alice, id, "normal", "127.0.0.1:9000")

	names := waitTools(t, e.Svc, alice, id, "tools_echo and read_echo", func(n []string) bool {
		return slices.Contains(n, "tools_echo") && slices.Contains(n, "read_echo")
	})
	for _, want := range []string{"bash", "read_file", "tools_echo", "tools_file", "read_echo"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %q: %s missing", names, want)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("tool %q listed twice", n)
		}
		seen[n] = true
		if len(n) > 128 || strings.ContainsAny(n, " \n/") || strings.Contains(n, "..") {
			t.Errorf("tool %q is listed; no client may call it", n)
		}
	}

	if got, isErr := callText(t, e.Svc, alice, id, "tools_echo", map[string]any{"text": "hi"}); isErr || got != "echo: hi" {
		t.Fatalf("tools_echo answered %q (is_error %v), want the upstream's echo", got, isErr)
	}
	bash(t, e.Svc, alice, id, "echo builtin-content > f.txt", nil)
	if got, _ := callText(t, e.Svc, alice, id, "read_file", map[string]any{"path": "f.txt"}); !strings.Contains(got, "builtin-content") || strings.Contains(got, "SHADOWED") {
		t.Fatalf("read_file answered %q, want the built-in's answer", got)
	}
}

// TestHostileUpstreamsAreBounded: upstreams in a real sandbox that answer
// tools/list without end, or with pages of fat tools without end, cost
// the agent a bounded amount of memory, and berth lists the built-in
// tools as before.
func TestHostileUpstreamsAreBounded(t *testing.T) {
	e, alice, id := upstreamServer(t, orchestrator.MCPUpstream{Name: "endless", URL: "http://127.0.0.1:9001/mcp"},
		orchestrator.MCPUpstream{Name: "pages", URL: "http://127.0.0.1:9002/mcp"})
	startUpstream(t, e.Svc, alice, id, "endless", "127.0.0.1:9001")
	startUpstream(t, e.Svc, alice, id, "pages", "127.0.0.1:9002")

	want := map[string]string{"endless": "longer than 4194304 bytes", "pages": "more than 8388608 bytes"}
	end := time.Now().Add(deadline)
	for {
		var caps wire.Capabilities
		agentGet(t, e.Svc, alice, id, "api/capabilities", &caps)
		done := 0
		for _, u := range caps.Upstreams {
			if w := want[u.Name]; w != "" && strings.Contains(u.LastError, w) && !u.Connected {
				done++
			}
		}
		if done == len(want) {
			break
		}
		if time.Now().After(end) {
			logs := bash(t, e.Svc, alice, id, "tail -n 20 endless.log pages.log; ps -eo pid,stat,args", nil)
			t.Fatalf("the agent reports %+v, want both upstreams refused for their size; in the sandbox:\n%s", caps.Upstreams, logs.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	names := waitTools(t, e.Svc, alice, id, "the built-in tools", func(n []string) bool { return slices.Contains(n, "bash") })
	for _, n := range names {
		if strings.HasPrefix(n, "endless_") || strings.HasPrefix(n, "pages_") {
			t.Errorf("tool %q of a hostile upstream is listed", n)
		}
	}
	// The agent's peak memory: bounded by the per-message and listing
	// limits, where reading either answer whole would take gigabytes.
	res := bash(t, e.Svc, alice, id, `for p in /proc/[0-9]*; do if tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q -- '--upstreams-dir'; then awk '/VmHWM/ {print $2}' $p/status; fi; done`, nil)
	var kb int
	for _, f := range strings.Fields(res.Stdout) {
		var v int
		if _, err := fmt.Sscan(f, &v); err == nil && v > kb {
			kb = v
		}
	}
	if kb == 0 {
		t.Fatalf("no agent peak memory found: %+v", res)
	}
	t.Logf("agent peak RSS after the hostile upstreams: %d KiB", kb)
	if kb > 128<<10 {
		t.Fatalf("the agent's peak RSS is %d KiB, want it bounded well below 128 MiB", kb)
	}
}

// TestSandboxCannotRedirectUpstreams: root in a sandbox cannot write,
// replace or point elsewhere the declarations berth wrote; after it tried
// (with symlinks everywhere it can write) a restart writes them again in
// the server's own directory and nowhere else.
func TestSandboxCannotRedirectUpstreams(t *testing.T) {
	e := newService(t, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "redirect")
	ups := []orchestrator.MCPUpstream{{Name: "tools", URL: "http://127.0.0.1:9000/mcp"}}
	id := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", MCPUpstreams: ups}).ServerID
	canary := filepath.Join(t.TempDir(), "canary")
	dir := runtime.UpstreamsDir
	for _, cmd := range []string{
		"echo '{}' > " + dir + "/evil.json",
		"rm -f " + dir + "/tools.json",
		"ln -s " + canary + " " + dir + "/evil.json",
		"mv " + dir + " /run/moved",
		"mount -t tmpfs none " + dir,
		"umount " + dir,
	} {
		if res := bash(t, e.Svc, alice, id, cmd, nil); res.ExitCode == 0 {
			t.Errorf("%q in the sandbox succeeded", cmd)
		}
	}
	if res := bash(t, e.Svc, alice, id, "ls "+dir, nil); res.Stdout != "tools.json\n" {
		t.Fatalf("after the attempts the sandbox's %s holds %q", dir, res.Stdout)
	}
	// Symlinks wherever the sandbox may write, aimed at a host file.
	bash(t, e.Svc, alice, id, "for d in /workspace /tmp /run; do ln -s "+canary+" $d/tools.json; ln -s "+filepath.Dir(canary)+" $d/upstreams; done", nil)
	op, err := e.Svc.RestartServer(context.Background(), alice, orchestrator.ServerRef{ServerID: id}, deadline.Seconds())
	if err != nil || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("restart: %+v %v", op, err)
	}
	if _, err := os.Lstat(canary); err == nil {
		t.Fatal("berth wrote through a symlink the sandbox planted")
	}
	if entries, _ := os.ReadDir(filepath.Dir(canary)); len(entries) != 0 {
		t.Fatalf("berth wrote %v next to the canary", entries)
	}
	if res := bash(t, e.Svc, alice, id, "cat "+dir+"/tools.json", nil); res.Stdout != `{"url":"http://127.0.0.1:9000/mcp"}` {
		t.Fatalf("after the restart tools.json in the sandbox is %q", res.Stdout)
	}
}
