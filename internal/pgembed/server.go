//go:build unix

package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// adoptTimeout bounds the wait for a server found running that is not
// accepting connections yet (it may still be recovering).
const adoptTimeout = 120 * time.Second

func (c *Cluster) logPath() string { return filepath.Join(c.dir, "postgres.log") }

// initdb creates the data directory on first use. It builds the cluster
// in a scratch directory and renames it into place, so an initdb cut off
// halfway (cancelled, killed) never leaves a data directory that looks
// initialized.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	scratch := c.dataDir + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("embedded postgres: remove leftover %s: %w", scratch, err)
	}
	c.log.Info("initializing embedded postgres cluster", "initdb", c.bins.initdb, "run_as", c.as.String())
	out, err := c.run(ctx, c.bins.initdb,
		"-D", scratch, "-U", superuser, "--auth=trust", "--encoding=UTF8", "--no-locale")
	if err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("embedded postgres: initdb %s: %w\n%s", scratch, err, lastLines(out, 20))
	}
	if err := os.Rename(scratch, c.dataDir); err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("embedded postgres: move new cluster into %s (it must be missing or empty): %w", c.dataDir, err)
	}
	return nil
}

// running asks pg_ctl whether a server of this data directory is up.
// pg_ctl checks the pid in postmaster.pid, so a stale file left by a
// crash reads as not running.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	out, err := c.pgctl(ctx, "status", "-D", c.dataDir)
	if err == nil {
		return true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return false, nil
	}
	return false, fmt.Errorf("embedded postgres: pg_ctl status %s: %w: %s", c.dataDir, err, strings.TrimSpace(string(out)))
}

func (c *Cluster) start(ctx context.Context) error {
	if err := c.writeConf(); err != nil {
		return err
	}
	c.log.Info("starting embedded postgres", "socket_dir", c.sockDir, "log", c.logPath())
	out, err := c.pgctl(ctx, "start", "-D", c.dataDir, "-l", c.logPath(), "-w", "-t", seconds(startTimeout))
	if err != nil {
		// pg_ctl may have been cut off after the postmaster forked.
		c.stopAfterFailure()
		return fmt.Errorf("embedded postgres: start %s: %w\n%s\nlast lines of %s:\n%s",
			c.dataDir, err, strings.TrimSpace(string(out)), c.logPath(), c.logTail(20))
	}
	return nil
}

// adopt takes over a server of this cluster left running by an earlier
// berth process, using the socket it actually listens on.
func (c *Cluster) adopt(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("embedded postgres: read postmaster.pid: %w", err)
	}
	// Lines: pid, data dir, start time, port, first socket dir, ...
	lines := strings.Split(string(raw), "\n")
	if len(lines) < 5 || strings.TrimSpace(lines[4]) == "" {
		return wire.Errorf(wire.CodeConflict,
			"embedded postgres: a server of %s is already running without a unix socket: stop it with `pg_ctl stop -D %s`", c.dataDir, c.dataDir)
	}
	p, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return fmt.Errorf("embedded postgres: bad port %q in postmaster.pid", lines[3])
	}
	c.port, c.sockDir, c.adopted = p, strings.TrimSpace(lines[4]), true
	c.log.Info("adopting embedded postgres left running", "pid", strings.TrimSpace(lines[0]), "socket_dir", c.sockDir)
	wctx, cancel := context.WithTimeout(ctx, adoptTimeout)
	defer cancel()
	if err := c.waitReady(wctx); err != nil {
		return fmt.Errorf("embedded postgres: server of %s is running (pid %s) but does not accept connections on %s: %w\nlast lines of %s:\n%s",
			c.dataDir, strings.TrimSpace(lines[0]), c.sockDir, err, c.logPath(), c.logTail(20))
	}
	return nil
}

// pgctl runs pg_ctl with the server's account.
func (c *Cluster) pgctl(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, c.bins.pgctl, args...)
}

// run runs one PostgreSQL program as the server's account and returns its
// combined output.
func (c *Cluster) run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir // the account must be able to enter the working dir
	cmd.Env = cleanEnv(os.Environ())
	cmd.SysProcAttr = c.as.sysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// cleanEnv drops PG* variables so the caller's PGDATA, PGPORT or
// PGOPTIONS cannot redirect the embedded server, and pins messages to
// English so errors read the same everywhere.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_MESSAGES=") || strings.HasPrefix(kv, "LC_ALL=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_MESSAGES=C")
}

// logTail returns the last n lines of postgres.log.
func (c *Cluster) logTail(n int) string {
	f, err := os.Open(c.logPath())
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const window = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(fi.Size()-window, io.SeekStart); err != nil {
			return "(" + err.Error() + ")"
		}
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return lastLines(raw, n)
}

func lastLines(raw []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
