package orchestrator_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

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
