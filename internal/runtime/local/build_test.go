//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// buildDeadline bounds one build of these tests.
const buildDeadline = 2 * time.Minute

func build(t *testing.T, r *local.Runtime, b runtime.ImageBuild) (runtime.BuildResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildDeadline)
	defer cancel()
	return r.BuildImage(ctx, b)
}

// tree describes a template: each path with its type, a symlink's target
// and a file's content.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch info, _ := d.Info(); {
		case d.IsDir():
			out[rel] = "dir"
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		default:
			out[rel] = info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildImage builds a template from a template, with files, env and
// commands, and starts a sandbox from it that sees all of them.
func TestBuildImage(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	os.MkdirAll(filepath.Join(dir, "images", "base0"), 0o755)
	os.WriteFile(filepath.Join(dir, "images", "base0", "from-base.txt"), []byte("base\n"), 0o644)
	r := newRuntime(t, dir)
	var steps []string
	res, err := build(t, r, runtime.ImageBuild{
		ID: "build-one", Name: "img1", Base: "base0",
		Files: []runtime.File{{Path: "src/app.txt", Content: "app\n"}},
		Env:   map[string]string{"GREETING": "hi"},
		Commands: []string{
			"test -f from-base.txt",
			"cp src/app.txt copy.txt\necho $GREETING > env.txt",
			"mkdir -p out && echo done > out/marker && chmod 0750 out && ln -s src/app.txt link",
		},
		Step: func(s string) { steps = append(steps, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != "img1" || !strings.Contains(res.Log, "$ test -f from-base.txt") {
		t.Fatalf("result %+v", res)
	}
	if !slices.ContainsFunc(steps, func(s string) bool { return strings.HasPrefix(s, "3/3 mkdir") }) {
		t.Fatalf("steps %q do not name the last command", steps)
	}
	tmpl := filepath.Join(dir, "images", "img1")
	got := tree(t, tmpl)
	want := map[string]string{
		"from-base.txt": "base\n", "src": "dir", "src/app.txt": "app\n", "copy.txt": "app\n", "env.txt": "hi\n",
		"out": "dir", "out/marker": "done\n", "link": "-> src/app.txt",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("template %s = %q, want %q (template: %v)", k, got[k], v, got)
		}
	}
	if st, err := os.Stat(filepath.Join(tmpl, "out")); err != nil || st.Mode().Perm() != 0o750 {
		t.Errorf("out's mode %v %v, want 0750", st.Mode(), err)
	}
	if ids, _ := r.List(ctx); len(ids) != 0 {
		t.Fatalf("sandboxes left after the build: %v", ids)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "image-builds")); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}

	// A sandbox started from the image has its files.
	if err := r.Create(ctx, runtime.Spec{ServerID: "from-img1", ImageTag: "img1", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), "from-img1") })
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ep, err := r.WaitReady(wctx, "from-img1")
	if err != nil {
		t.Fatal(err)
	}
	if out := bash(t, ep, "cat copy.txt env.txt out/marker link; echo $GREETING").Stdout; out != "app\nhi\ndone\napp\n\n" {
		t.Fatalf("sandbox from the image sees %q", out)
	}
}

// TestBuildImageFailure: a failing command fails the build naming it,
// its status and its output, and leaves the image as it was.
func TestBuildImageFailure(t *testing.T) {
	dir := dataDir(t)
	r := newRuntime(t, dir)
	if _, err := build(t, r, runtime.ImageBuild{ID: "build-good", Name: "img", Base: "host", Commands: []string{"echo v1 > version"}}); err != nil {
		t.Fatal(err)
	}
	_, err := build(t, r, runtime.ImageBuild{ID: "build-bad", Name: "img", Base: "img", Commands: []string{
		"echo v2 > version",
		"echo about to fail\necho oops >&2\nexit 3",
		"echo never > never",
	}})
	var f *runtime.BuildFailed
	if !errors.As(err, &f) {
		t.Fatalf("error %v, want a BuildFailed", err)
	}
	for _, w := range []string{"command 2 of 3", "echo about to fail", "status 3", "oops"} {
		if !strings.Contains(f.Reason, w) {
			t.Errorf("reason %q does not name %q", f.Reason, w)
		}
	}
	t.Logf("reason: %s\nlog:\n%s", f.Reason, f.Log)
	if !strings.Contains(f.Log, "about to fail") || strings.Contains(f.Log, "echo never") {
		t.Errorf("log %q", f.Log)
	}
	if got := tree(t, filepath.Join(dir, "images", "img")); got["version"] != "v1\n" || len(got) != 1 {
		t.Fatalf("the failed build changed the image: %v", got)
	}
	// A step that fails inside a multi-line command fails it (set -e).
	_, err = build(t, r, runtime.ImageBuild{ID: "build-mid", Name: "img", Base: "img", Commands: []string{"false\necho v3 > version"}})
	if !errors.As(err, &f) || !strings.HasSuffix(f.Reason, "exited with status 1; it printed nothing") {
		t.Fatalf("error %v, want the command failed with status 1", err)
	}
	if ids, _ := r.List(context.Background()); len(ids) != 0 {
		t.Fatalf("sandboxes left after failed builds: %v", ids)
	}
}

// TestBuildImageHostileWorkspace: a build that plants symlinks to host
// files and berth's key, and a FIFO, makes berth copy none of what they
// point to.
func TestBuildImageHostileWorkspace(t *testing.T) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "server.key")
	secretContent := []byte("berth-server-key-" + randomHex(t))
	if err := os.WriteFile(secret, secretContent, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := dataDir(t)
	r, err := local.New(local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: local.IsolationFull, HidePaths: []string{secret},
		Limits: local.Limits{DiskBytes: orchtest.SandboxDisk}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	_, err = build(t, r, runtime.ImageBuild{ID: "build-links", Name: "links", Base: "host", Commands: []string{
		"ln -s /etc/shadow shadow && ln -s " + secret + " key && ln -s " + dir + " data && ln -s / root",
		"mkdir -p d/e && ln -s /etc d/e/etc && ln -s ../../../../../../../etc/passwd d/e/up && ln -s d/e loop",
		"ln -s /proc/1/root proc-root && ln -s /dev/sda disk",
	}})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "images", "links")
	got := tree(t, root)
	want := map[string]string{
		"shadow": "-> /etc/shadow", "key": "-> " + secret, "data": "-> " + dir, "root": "-> /",
		"d": "dir", "d/e": "dir", "d/e/etc": "-> /etc", "d/e/up": "-> ../../../../../../../etc/passwd", "loop": "-> d/e",
		"proc-root": "-> /proc/1/root", "disk": "-> /dev/sda",
	}
	if len(got) != len(want) {
		t.Errorf("template has %d entries, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("template %s = %q, want %q", k, got[k], v)
		}
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, secretContent) || (len(shadow) > 0 && bytes.Equal(b, shadow)) {
				t.Errorf("berth copied a host file into the template at %s", p)
			}
		}
		return nil
	})

	_, err = build(t, r, runtime.ImageBuild{ID: "build-fifo", Name: "fifo", Base: "host", Commands: []string{"mkdir sub && mkfifo sub/pipe"}})
	var f *runtime.BuildFailed
	if !errors.As(err, &f) || !strings.Contains(f.Reason, "sub/pipe is a FIFO") {
		t.Fatalf("a FIFO in the workspace: %v, want the build failed naming it", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "images", "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused workspace became a template: %v", err)
	}
}

// TestBuildImageStartsOverAfterACrash: a sandbox left by an earlier call
// with the same ID (its caller died) is not built on: the build starts
// again from its base.
func TestBuildImageStartsOverAfterACrash(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	r := newRuntime(t, dir)
	if err := r.Create(ctx, runtime.Spec{ServerID: "build-again", AgentToken: token}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ep, err := r.WaitReady(wctx, "build-again")
	if err != nil {
		t.Fatal(err)
	}
	bash(t, ep, "echo half-done > leftover")
	if _, err := build(t, r, runtime.ImageBuild{ID: "build-again", Name: "again", Base: "host", Commands: []string{"echo ok > ok"}}); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, filepath.Join(dir, "images", "again")); len(got) != 1 || got["ok"] != "ok\n" {
		t.Fatalf("template after a restarted build: %v", got)
	}
}

// TestBuildImageUnconfined: with isolation none the build runs the same
// way, in a plain process's workspace.
func TestBuildImageUnconfined(t *testing.T) {
	dir := dataDir(t)
	r, err := local.New(local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: local.IsolationNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := build(t, r, runtime.ImageBuild{ID: "build-plain", Name: "plain", Base: "host",
		Files: []runtime.File{{Path: "f", Content: "x"}}, Commands: []string{"ln -s /etc/hostname host && cp f g"}}); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, filepath.Join(dir, "images", "plain")); len(got) != 3 || got["g"] != "x" || got["host"] != "-> /etc/hostname" {
		t.Fatalf("template %v", got)
	}
	if ids, _ := r.List(context.Background()); len(ids) != 0 {
		t.Fatalf("sandboxes left: %v", ids)
	}
}

// TestBuildImageKeepsTheReserve: a build whose workspace is too large to
// be copied out above the data directory's reserve fails saying so,
// before the copy, and leaves the reserve and no image behind.
func TestBuildImageKeepsTheReserve(t *testing.T) {
	const reserve = 96 << 20
	fs := smallFilesystem(t, 400<<20)
	dir := filepath.Join(fs, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, Reserve: reserve,
		Limits: local.Limits{DiskBytes: 256 << 20}})
	// The build's volume takes 256 MiB of the 400; copying out 200 MiB
	// of files would leave less than the reserve.
	_, err := build(t, r, runtime.ImageBuild{ID: "build-big", Name: "big", Commands: []string{"head -c 200M /dev/zero > big"}})
	var failed *runtime.BuildFailed
	if !errors.As(err, &failed) || !strings.Contains(failed.Reason, "not enough disk space") || !strings.Contains(failed.Reason, "96Mi") {
		t.Fatalf("a build too large to keep above the reserve: %v, want it failed naming the reserve", err)
	}
	if free := freeBytes(t, fs); free < reserve {
		t.Fatalf("after the build the data directory has %d bytes free, less than its %d reserve", free, reserve)
	}
	if _, err := os.Lstat(filepath.Join(dir, "images", "big")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused image exists: %v", err)
	}
}
