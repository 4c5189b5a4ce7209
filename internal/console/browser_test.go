package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/browsertest"
	"github.com/berth-mcp/berth/internal/interop"
	"github.com/berth-mcp/berth/internal/servetest"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// browserDir holds the pinned npm packages (playwright-core, axe-core)
// and the script that drives the console.
func browserDir() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "browser")
}

// artifacts is where screenshots go: $BERTH_TEST_ARTIFACTS/<test> when
// set (kept after the test), else a temporary folder, kept in the log's
// words when the test fails.
func artifacts(t *testing.T) string {
	dir := t.TempDir()
	if base := os.Getenv("BERTH_TEST_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestConsoleInBrowser runs the real berth binary (`berth serve` on a
// loopback port with a fresh database and the local runtime, so
// sandboxes are real) and drives its console in headless Chromium with
// Playwright: the development login, starting a server from the console,
// a command and its output, a status change made over REST arriving
// without a reload, stopping it, a form without its CSRF token refused,
// another user's server not found, the operations filters, a phone-sized
// page, and an axe-core audit and a screenshot of every main page.
func TestConsoleInBrowser(t *testing.T) {
	chromium := browsertest.Path(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the console's browser tests run Playwright on Node.js 20+ (apt-get install nodejs npm)")
	}
	dir := browserDir()
	interop.Install(t, dir, filepath.Join(dir, "node_modules", "playwright-core", "package.json"),
		filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	shots := artifacts(t)

	b := startBerth(t)
	token := b.command(t, "token", "create", "--user", "alice", "--name", "browser test")

	// The TypeScript MCP SDK the interop tests pin is the client the
	// tokens script connects.
	interop.Node(t)
	sdk := filepath.Join(interop.Dir(), "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm")
	for _, run := range []struct {
		script string
		shots  []string
	}{
		{"console.mjs", []string{"home-signed-out", "login", "home", "servers-empty", "server", "servers", "operations", "apps", "not-found"}},
		{"tokens.mjs", []string{"tokens", "token-created", "token-revoked", "admin", "admin-audit", "admin-forbidden", "consent"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		start := time.Now()
		cmd := exec.CommandContext(ctx, node, run.script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BERTH_URL="+b.url, "BERTH_TOKEN="+token, "CHROMIUM="+chromium, "ARTIFACTS="+shots, "BERTH_TS_SDK="+sdk)
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("browser run of %s (%s):\n%s", run.script, time.Since(start).Round(time.Millisecond), out)
		if err != nil {
			t.Errorf("the browser run of %s failed: %v; screenshots in %s; berth's log:\n%s", run.script, err, shots, b.log.String())
		}
		for _, name := range run.shots {
			if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() == 0 {
				t.Errorf("no screenshot of %s: %v", name, err)
			}
		}
	}
}

// berthProcess is a running `berth serve`.
type berthProcess struct {
	bin, data, dbFile, url string
	log                    *syncbuf.Buffer
}

// startBerth builds berth and berth-agent (the server finds the agent
// next to itself) and runs `berth serve` on a fresh database until the
// test ends.
func startBerth(t *testing.T) *berthProcess {
	t.Helper()
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	for name, pkg := range map[string]string{"berth": "github.com/berth-mcp/berth/cmd/berth", "berth-agent": "github.com/berth-mcp/berth/cmd/berth-agent"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	data := t.TempDir()
	// Sandboxes run as other uids: they must reach their directories.
	for p := data; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	dbFile := filepath.Join(t.TempDir(), "database-url")
	if err := os.WriteFile(dbFile, []byte(storetest.URL(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &berthProcess{bin: filepath.Join(bin, "berth"), data: data, dbFile: dbFile}
	cmd := exec.Command(b.bin, "serve", "--data-dir", data, "--database-url-file", dbFile, "--listen", "127.0.0.1:0", "--log-level", "warn",
		"--sandbox-disk", "256Mi") // small volumes (allocated whole): tests share the machine's disk
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := servetest.Start(t, cmd)
	b.url, b.log = p.URL, p.Log
	return b
}

// command runs a berth CLI command against the server's database and
// returns its output.
func (b *berthProcess) command(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(b.bin, append(args, "--data-dir", b.data, "--database-url-file", b.dbFile)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("berth %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}
