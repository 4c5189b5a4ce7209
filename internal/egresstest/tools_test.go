//go:build linux

package egresstest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needTool skips the test when a program it runs is missing.
func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("needs %s: %v", name, err)
		}
	}
}

func toolContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// git clones demo.git from git.test over HTTP and HTTPS in a client
// namespace (names from the test DNS through resolv.conf), and its test
// script runs.
func TestGitCloneFromClient(t *testing.T) {
	needTool(t, "git")
	inet := Start(t)
	client := inet.Client(t)
	ctx := toolContext(t)
	for _, scheme := range []string{"http", "https"} {
		dir := filepath.Join(t.TempDir(), "demo")
		if _, err := client.Run(ctx, "git", "clone", "-q", scheme+"://git.test/"+GitRepo, dir); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, "sh", filepath.Join(dir, GitTestScript)).CombinedOutput()
		if err != nil || string(out) != GitTestOutput {
			t.Errorf("%s clone: test.sh: %q %v", scheme, out, err)
		}
	}
}

// git in the host's namespace clones over HTTPS given the test CA and
// the address (curl's resolve list, as no system resolver knows .test).
func TestGitCloneFromHost(t *testing.T) {
	needTool(t, "git")
	inet := Start(t)
	ctx := toolContext(t)
	dir := filepath.Join(t.TempDir(), "demo")
	cmd := exec.CommandContext(ctx, "git",
		"-c", "http.sslCAInfo="+inet.CAFile,
		"-c", fmt.Sprintf("http.curloptResolve=git.test:443:%s", inet.Addr("git.test")),
		"clone", "-q", "https://git.test/"+GitRepo, dir)
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "log", "--format=%s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo:") {
		t.Errorf("git log: %q %v", out, err)
	}
}

// git.test serves read only: a push is refused.
func TestGitPushRefused(t *testing.T) {
	needTool(t, "git")
	inet := Start(t)
	client := inet.Client(t)
	ctx := toolContext(t)
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := client.Run(ctx, "git", "clone", "-q", "https://git.test/"+GitRepo, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Run(ctx, "git", "-C", dir, "-c", "user.name=x", "-c", "user.email=x@x.test", "commit", "-q", "--allow-empty", "-m", "more"); err != nil {
		t.Fatal(err)
	}
	if out, err := client.Run(ctx, "git", "-C", dir, "push", "-q", "origin", "HEAD:main"); err == nil {
		t.Fatalf("push was accepted: %s", out)
	}
}

// pip installs berth-demo from pypi.test's simple index over HTTPS in a
// client namespace, and it imports.
func TestPipInstall(t *testing.T) {
	needTool(t, "pip", "python3")
	inet := Start(t)
	client := inet.Client(t)
	ctx := toolContext(t)
	target := t.TempDir()
	if _, err := client.Run(ctx, "pip", "install", "--no-cache-dir", "--no-deps", "--no-index", "--index-url", "https://pypi.test/simple", "--target", target, PyPIProject); err == nil {
		t.Fatal("pip installed with --no-index: the test proves nothing")
	}
	out, err := client.Run(ctx, "pip", "install", "--no-cache-dir", "--index-url", "https://pypi.test/simple", "--target", target, PyPIProject)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Successfully installed berth-demo-1.0") {
		t.Errorf("pip said:\n%s", out)
	}
	py := exec.CommandContext(ctx, "python3", "-c", "import "+PyPIModule+"; print("+PyPIModule+".GREETING)")
	py.Env = append(py.Environ(), "PYTHONPATH="+target)
	got, err := py.CombinedOutput()
	if err != nil || string(got) != PyPIGreeting+"\n" {
		t.Errorf("import %s: %q %v", PyPIModule, got, err)
	}
	if inet.Requests("pypi.test") < 2 {
		t.Errorf("pypi.test had %d requests: pip did not fetch the index and the wheel from it", inet.Requests("pypi.test"))
	}
}

// npm installs berth-demo from npm.test over HTTPS in a client namespace,
// checking the tarball's integrity, and it loads.
func TestNPMInstall(t *testing.T) {
	needTool(t, "npm", "node")
	inet := Start(t)
	client := inet.Client(t)
	ctx := toolContext(t)
	prefix := t.TempDir()
	if _, err := client.Run(ctx, "npm", "install", "--registry", "https://npm.test/", "--prefix", prefix,
		"--cache", filepath.Join(t.TempDir(), "cache"), "--no-audit", "--no-fund", "--no-update-notifier", NPMPackage); err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", "-e", `console.log(require(process.argv[1]).greeting)`, filepath.Join(prefix, "node_modules", NPMPackage))
	got, err := node.CombinedOutput()
	if err != nil || string(got) != NPMGreeting+"\n" {
		t.Errorf("require %s: %q %v", NPMPackage, got, err)
	}
	if inet.Requests("npm.test") < 2 {
		t.Errorf("npm.test had %d requests: npm did not fetch the packument and the tarball from it", inet.Requests("npm.test"))
	}
}
