package orchtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// UpstreamImage makes an image of e's local runtime (a template
// directory) holding ./upstream, the test MCP server of
// testdata/upstream, and returns its tag. The server is built statically,
// so that it runs in a sandbox that sees only the host's system
// directories; start it in a sandbox with UpstreamCommand. The go build
// cache makes every build after the first a link.
func (e *Env) UpstreamImage(t testing.TB) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("orchtest: cannot tell where its source is")
	}
	tmpl := filepath.Join(e.DataDir, "images", "mcp")
	if err := os.MkdirAll(tmpl, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(tmpl, "upstream"), "./testdata/upstream")
	cmd.Dir = filepath.Dir(self)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test upstream: %v\n%s", err, out)
	}
	return "mcp"
}

// UpstreamCommand is the bash command that starts the test upstream of
// UpstreamImage in the workspace in its own session, so that it outlives
// the command, and waits (up to a minute) until it accepts connections on
// addr (host:port), failing with its log otherwise. The wait matters:
// once the command's bash exits the agent kills what is left of its
// process group, which includes the upstream until setsid has moved it
// out. mode is normal (tools echo and file, and tools with names no client
// may call), endless or pages (hostile tools/list answers without end).
func UpstreamCommand(mode, addr string) string {
	host, port, _ := strings.Cut(addr, ":")
	return "setsid -f ./upstream -mode " + mode + " -listen " + addr + " >" + mode + ".log 2>&1 </dev/null\n" +
		"for i in $(seq 600); do (exec 3<>/dev/tcp/" + host + "/" + port + ") 2>/dev/null && exit 0; sleep 0.1; done\n" +
		"echo 'the upstream does not listen on " + addr + "' >&2; cat " + mode + ".log >&2; exit 1"
}

// ToolText is the text of a server tool's answer (its content's text
// parts, one a line).
func ToolText(content []json.RawMessage) string {
	var out string
	for i, c := range content {
		var tc struct{ Text string }
		json.Unmarshal(c, &tc)
		if i > 0 {
			out += "\n"
		}
		out += tc.Text
	}
	return out
}
