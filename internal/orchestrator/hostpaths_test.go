package orchestrator_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestErrorsNameNoHostPath drives every file operation of a real sandbox
// into its errors (paths that climb out, absolute paths, symlinks out,
// missing files, files where directories belong, a tar that climbs out,
// a cwd that is a file): each error names the caller's workspace-relative
// path, never where berth keeps the workspace on the host, which would
// tell a caller berth's data directory and the server's layout.
//
// With --isolation none the agent's workspace is the host directory
// itself; confined, it is the sandbox's /workspace: neither is named.
func TestErrorsNameNoHostPath(t *testing.T) {
	for _, isolation := range []string{local.IsolationNone, local.IsolationFull} {
		t.Run(isolation, func(t *testing.T) {
			dir := orchtest.DataDir(t)
			rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: isolation})
			e := orchtest.NewOn(t, rt, testConfig(t, orchestrator.Config{}))
			e.Runtime, e.DataDir = rt, dir
			alice := principal(t, e.Svc, "alice")
			c := registerClient(t, e.Svc, alice, "paths")
			srv := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"}).ServerID
			errorsNameNoHostPath(t, running{e: e, alice: alice, server: srv})
		})
	}
}

func errorsNameNoHostPath(t *testing.T, h running) {
	svc, p, id, ctx := h.e.Svc, h.alice, h.server, context.Background()
	root := strings.TrimSpace(h.sh(t, "pwd && echo x > f.txt && mkdir -p d && ln -s /etc/passwd out && ln -s ../../.. up"))
	// The workspace as the agent sees it, and where it is on the host.
	hidden := []string{root, h.e.DataDir, "/servers/" + id}
	if real, err := filepath.EvalSymlinks(h.e.DataDir); err == nil {
		hidden = append(hidden, real)
	}

	var texts []string
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			return // some paths are fine for some operations
		}
		texts = append(texts, what+": "+err.Error()+" | "+wire.DetailOf(err).Message)
	}
	for _, path := range []string{"../../etc/passwd", "..", "/etc/passwd", "/", "missing/f", "f.txt/x", "up/etc/passwd", "out"} {
		_, err := svc.ReadFile(ctx, p, orchestrator.ReadFileRequest{ServerID: id, Path: path})
		check("read "+path, err)
		_, err = svc.WriteFile(ctx, p, orchestrator.WriteFileRequest{ServerID: id, WriteFileRequest: wire.WriteFileRequest{Path: path + "/new", Content: "x"}})
		check("write "+path, err)
		_, err = svc.CreateFile(ctx, p, orchestrator.CreateFileRequest{ServerID: id, CreateFileRequest: wire.CreateFileRequest{Path: path + "/new", Content: "x"}})
		check("create "+path, err)
		_, err = svc.EditFile(ctx, p, orchestrator.EditFileRequest{ServerID: id, EditFileRequest: wire.EditFileRequest{Path: path, StartLine: 1, EndLine: 1, NewContent: "y"}})
		check("edit "+path, err)
		_, err = svc.PatchFile(ctx, p, orchestrator.PatchFileRequest{ServerID: id, PatchFileRequest: wire.PatchFileRequest{Path: path, Patch: "@@ -1 +1 @@\n-x\n+y\n"}})
		check("patch "+path, err)
		if path != "/" && path != ".." {
			_, err = svc.ListFiles(ctx, p, orchestrator.ListFilesRequest{ServerID: id, Path: path + "/.."})
			check("list "+path+"/..", err)
		}
		_, err = h.download(t, path)
		check("download "+path, err)
		_, err = h.upload(path, tarOf(t, entry{name: "a", body: "x"}))
		check("upload into "+path, err)
		res, err := svc.CallServerTool(ctx, p, orchestrator.CallServerToolRequest{ServerID: id, ToolName: "read_file", Arguments: map[string]any{"path": path}})
		if err == nil {
			b, _ := json.Marshal(res)
			texts = append(texts, "mcp read_file "+path+": "+string(b))
		} else {
			check("mcp read_file "+path, err)
		}
	}
	for _, bad := range [][]entry{
		{{name: "../evil", body: "x"}},
		{{name: "l", kind: tar.TypeSymlink, link: "/etc"}, {name: "l/passwd", body: "x"}},
		{{name: "out/x", body: "x"}},
	} {
		_, err := h.upload(".", tarOf(t, bad...))
		check("upload "+bad[0].name, err)
	}
	for _, cwd := range []string{"f.txt", "f.txt/x", "nothing/here", "out"} {
		op := h.runBash(t, orchestrator.RunBashRequest{Cwd: cwd})
		texts = append(texts, "bash cwd "+cwd+": "+op.Error+" "+string(op.Result))
	}

	if len(texts) < 60 || !strings.Contains(texts[0], "escapes the workspace") {
		t.Errorf("%d errors, the first %q: want most operations refused", len(texts), texts[0])
	}
	for _, text := range texts {
		for _, dir := range hidden {
			if strings.Contains(text, dir) {
				t.Errorf("%s\n  names %s", text, dir)
				break
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("errors seen:\n%s", strings.Join(texts, "\n"))
	}
}

// TestSandboxAndFailuresNameNoHostPath looks for berth's data directory
// where a sandbox or a client can read it: from inside a confined
// sandbox, as its root, in every process's mount tables and in the target
// of every descriptor, cwd, root and executable it can read; then, after
// killing the agent from inside, in what berth says of the failed server:
// its error, its events, its logs, the failed command and later calls to
// it. Issue 18 item 8.
func TestSandboxAndFailuresNameNoHostPath(t *testing.T) {
	dir := orchtest.DataDir(t)
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: local.IsolationFull})
	e := orchtest.NewOn(t, rt, testConfig(t, orchestrator.Config{}))
	e.Runtime, e.DataDir = rt, dir
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "paths")
	id := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img"}).ServerID
	h := running{e: e, alice: alice, server: id}
	ctx := context.Background()

	// The data directory, the layout under it, and where berth puts
	// agent sockets whose path under it would be too long.
	hidden := []string{dir, "/servers/" + id, "agent.sock", "volume/berth", "volume/workspace", filepath.Join(os.TempDir(), "berth-")}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		hidden = append(hidden, real)
	}
	var texts []string
	add := func(what, text string) { texts = append(texts, what+": "+text) }
	addErr := func(what string, err error) {
		if err != nil {
			add(what, err.Error()+" | "+wire.DetailOf(err).Message)
		}
	}

	inside := h.sh(t, `for p in /proc/[0-9]* /proc/self /proc/thread-self; do
		cat $p/mountinfo $p/mounts $p/mountstats $p/maps
		for f in $p/fd/* $p/task/*/fd/* $p/cwd $p/root $p/exe $p/map_files/*; do readlink "$f"; done
	done 2>/dev/null; true`)
	if !strings.Contains(inside, " /workspace ") || !strings.Contains(inside, "socket:[") {
		t.Fatalf("the scan from inside saw neither the workspace mount nor the agent's sockets:\n%s", inside)
	}
	add("inside the sandbox", inside)
	logs, err := e.Svc.ServerLogs(ctx, alice, id, 1000)
	addErr("get_server_logs", err)
	add("get_server_logs", logs)

	// The agent dies; the command that killed it, the server, its events
	// and logs, and later calls tell of it.
	op := h.runBash(t, orchestrator.RunBashRequest{Command: "kill -KILL $PPID"})
	add("the killing command", op.Error+" "+string(op.Result))
	var srv orchestrator.ServerDetail
	for end := time.Now().Add(deadline); ; {
		if srv, err = e.Svc.GetServer(ctx, alice, id); err != nil {
			t.Fatal(err)
		}
		if srv.Status == orchestrator.ServerFailed {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server of the killed agent is %s, not FAILED", srv.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	add("the failed server's error", srv.Error)
	for _, ev := range srv.Events {
		add("event "+ev.Reason, ev.Message)
	}
	logs, err = e.Svc.ServerLogs(ctx, alice, id, 1000)
	addErr("get_server_logs of the failed server", err)
	add("get_server_logs of the failed server", logs)
	_, err = e.Svc.ReadFile(ctx, alice, orchestrator.ReadFileRequest{ServerID: id, Path: "f.txt"})
	addErr("read_file on the failed server", err)
	op, err = e.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{ServerID: id, Command: "true", WaitSeconds: deadline.Seconds()})
	addErr("run_bash_command on the failed server", err)
	add("run_bash_command on the failed server", op.Error+" "+string(op.Result))
	b, _ := json.Marshal(srv)
	add("get_server", string(b))

	for _, text := range texts {
		for _, p := range hidden {
			if strings.Contains(text, p) {
				what, _, _ := strings.Cut(text, ":")
				t.Errorf("%s names %s:\n%s", what, p, text)
				break
			}
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("seen:\n%s", strings.Join(texts, "\n"))
	}
}
