//go:build unix

package pgembed

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
	"github.com/jackc/pgx/v5"
)

// clusterDir returns a fresh cluster directory the postgres account can
// reach: t.TempDir() and its parent are 0700, which a root test run hands
// to that account by opening them to traversal.
func clusterDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	if os.Geteuid() == 0 {
		for _, d := range []string{base, filepath.Dir(base)} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return filepath.Join(base, "pg")
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startCluster starts a cluster and makes sure it is stopped when the test
// ends, failing the test if a server is left running.
func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(testCtx(t), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopAndCheck(t, c) })
	return c
}

func stopAndCheck(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("postmaster.pid still present after Stop (err %v)", err)
	}
}

func connect(t *testing.T, c *Cluster) *pgx.Conn {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatalf("connect %s: %v", c.URL(), err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func postmasterPID(t *testing.T, c *Cluster) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(string(raw), "\n", 2)[0]
}

func TestStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Options{Dir: dir})
	ctx := testCtx(t)

	if want := filepath.Join(dir, "run"); c.sockDir != want {
		t.Errorf("socket dir = %s, want %s", c.sockDir, want)
	}
	conn := connect(t, c)
	var db, listen string
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('listen_addresses')").Scan(&db, &listen); err != nil {
		t.Fatal(err)
	}
	if db != "berth" || listen != "" {
		t.Errorf("database %q listen_addresses %q, want berth and empty", db, listen)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); err != nil {
		t.Errorf("postgres.log: %v", err)
	}

	stopAndCheck(t, c)
	if err := c.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, c.URL()); err == nil {
		t.Fatal("connected after Stop")
	}

	c2 := startCluster(t, Options{Dir: dir})
	if c2.adopted {
		t.Error("restart after Stop reported an adopted server")
	}
	var v string
	if err := connect(t, c2).QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "kept" {
		t.Errorf("row = %q, want kept", v)
	}
}

func TestStartAdoptsRunningServer(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c1 := startCluster(t, Options{Dir: dir, Database: "app"})
	pid := postmasterPID(t, c1)

	c2 := startCluster(t, Options{Dir: dir, Database: "app"})
	if !c2.adopted {
		t.Error("second Start did not adopt the running server")
	}
	if got := postmasterPID(t, c2); got != pid {
		t.Errorf("postmaster pid %s after second Start, want the adopted %s", got, pid)
	}
	if c2.URL() != c1.URL() {
		t.Errorf("URL %s, want %s", c2.URL(), c1.URL())
	}
	var db string
	if err := connect(t, c2).QueryRow(testCtx(t), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if db != "app" {
		t.Errorf("database %q, want app", db)
	}
	// Either handle may stop the server; the other one's Stop is then a no-op.
	stopAndCheck(t, c2)
	stopAndCheck(t, c1)
}

func TestStartRecoversFromStaleLockFile(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Options{Dir: dir})
	// A crashed server leaves its lock files naming a pid that is gone.
	locks := []string{
		filepath.Join(c.dataDir, "postmaster.pid"),
		filepath.Join(c.sockDir, ".s.PGSQL.5432.lock"),
	}
	saved := make([][]byte, len(locks))
	for i, p := range locks {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		saved[i] = raw
	}
	stopAndCheck(t, c)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for i, p := range locks {
		rest := strings.SplitN(string(saved[i]), "\n", 2)[1]
		if err := os.WriteFile(p, []byte(strconv.Itoa(dead.Process.Pid)+"\n"+rest), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.as.chown(p); err != nil {
			t.Fatal(err)
		}
	}

	c2 := startCluster(t, Options{Dir: dir})
	if c2.adopted {
		t.Error("stale lock file was taken for a running server")
	}
	if got := postmasterPID(t, c2); got == strconv.Itoa(dead.Process.Pid) {
		t.Error("postmaster.pid still names the dead pid")
	}
	connect(t, c2)
}

func TestStartFailureReportsLog(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := startCluster(t, Options{Dir: dir})
	stopAndCheck(t, c)

	conf := filepath.Join(c.dataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("shared_buffers = 'lots'\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	c2, err := Start(testCtx(t), Options{Dir: dir})
	if err == nil {
		stopAndCheck(t, c2)
		t.Fatal("Start succeeded with a broken postgresql.conf")
	}
	if !strings.Contains(err.Error(), "shared_buffers") || !strings.Contains(err.Error(), "postgres.log") {
		t.Errorf("error does not carry the log tail: %v", err)
	}
	if running, rerr := c.running(testCtx(t)); rerr != nil || running {
		t.Errorf("server running=%v (err %v) after failed Start", running, rerr)
	}
}

func TestStartLongDirUsesShortSocketDir(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	dir = filepath.Join(dir, strings.Repeat("d", 100))
	c := startCluster(t, Options{Dir: dir})
	t.Cleanup(func() { os.RemoveAll(c.sockDir) }) // runs after Stop
	if strings.HasPrefix(c.sockDir, dir) || !strings.HasPrefix(c.sockDir, os.TempDir()) {
		t.Errorf("socket dir %s, want a short one under %s", c.sockDir, os.TempDir())
	}
	connect(t, c)
}

func TestStartCancelledDuringInitdb(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go func() {
		// Cut Start off once initdb is writing its scratch directory.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if _, err := os.Stat(filepath.Join(dir, "data.initdb", "base")); err == nil {
				cancel()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	c, err := Start(ctx, Options{Dir: dir})
	if err == nil {
		stopAndCheck(t, c)
		t.Fatal("Start succeeded although it was cancelled during initdb")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a cut-off initdb left an initialized-looking data dir (err %v)", err)
	}
	// The next Start must still work.
	connect(t, startCluster(t, Options{Dir: dir}))
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	cases := map[string]Options{
		"no dir":         {},
		"quote in dir":   {Dir: filepath.Join(dir, `a"b`)},
		"long database":  {Dir: dir, Database: strings.Repeat("x", 64)},
		"newline in dir": {Dir: filepath.Join(dir, "a\nb")},
	}
	for name, opts := range cases {
		_, err := Start(testCtx(t), opts)
		if err == nil {
			t.Errorf("%s: Start succeeded", name)
			continue
		}
		if code := wire.DetailOf(err).Code; code != wire.CodeBadRequest {
			t.Errorf("%s: code %s, want %s (%v)", name, code, wire.CodeBadRequest, err)
		}
	}
}

func TestStartUnreachableDirAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to another account")
	}
	t.Parallel()
	locked := filepath.Join(filepath.Dir(clusterDir(t)), "locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(testCtx(t), Options{Dir: filepath.Join(locked, "pg")})
	if err == nil {
		t.Fatal("Start succeeded below a directory the postgres account cannot enter")
	}
	if !strings.Contains(err.Error(), locked) || wire.DetailOf(err).Code != wire.CodeBadRequest {
		t.Errorf("error does not name %s as a bad request: %v", locked, err)
	}
	if fi, err := os.Stat(locked); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("permissions of %s were changed: %v %v", locked, fi.Mode(), err)
	}
}

func TestStartMissingBinaries(t *testing.T) {
	t.Setenv("PATH", "")
	dir := clusterDir(t)
	_, err := Start(testCtx(t), Options{Dir: dir, searchRoot: t.TempDir()})
	if err == nil {
		t.Fatal("Start succeeded without binaries")
	}
	for _, want := range []string{"initdb", "pg_ctl", "apt-get install postgresql", "--database-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if code := wire.DetailOf(err).Code; code != wire.CodeUnavailable {
		t.Errorf("code %s, want %s", code, wire.CodeUnavailable)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cluster dir created although nothing can run (err %v)", err)
	}
}
