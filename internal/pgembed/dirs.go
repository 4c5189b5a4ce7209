//go:build unix

package pgembed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// maxSocketPath is the longest unix socket path the kernel takes
// (sizeof(sun_path) - 1).
const maxSocketPath = 107

// checkPathChars refuses cluster paths that pg_ctl cannot pass through
// its shell command line (it wraps the log path in double quotes).
func checkPathChars(dir string) error {
	for _, r := range dir {
		if r < 0x20 || r == 0x7f || strings.ContainsRune("\"$`\\", r) {
			return wire.Errorf(wire.CodeBadRequest,
				"embedded postgres: cluster directory %q contains %q, which PostgreSQL's pg_ctl cannot handle: choose a plainer path", dir, r)
		}
	}
	return nil
}

func checkDatabaseName(db string) error {
	if len(db) > 63 {
		return wire.Errorf(wire.CodeBadRequest, "embedded postgres: database name %q is longer than 63 bytes", db)
	}
	if strings.ContainsRune(db, 0) {
		return wire.Errorf(wire.CodeBadRequest, "embedded postgres: database name %q contains a NUL byte", db)
	}
	return nil
}

// prepareDirs creates the cluster home and socket directory and hands them
// to the account PostgreSQL runs as.
func (c *Cluster) prepareDirs() error {
	// Parents we create must stay traversable for the postgres account.
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("embedded postgres: create %s: %w", filepath.Dir(c.dir), err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("embedded postgres: create %s: %w", c.dir, err)
	}
	fi, err := os.Stat(c.dir)
	if err != nil {
		return fmt.Errorf("embedded postgres: stat %s: %w", c.dir, err)
	}
	if !fi.IsDir() {
		return wire.Errorf(wire.CodeBadRequest, "embedded postgres: cluster path %s exists and is not a directory", c.dir)
	}
	if err := c.as.checkReachable(c.dir); err != nil {
		return err
	}
	if err := c.as.chownTree(c.dir); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o700 != 0o700 {
		if err := os.Chmod(c.dir, fi.Mode().Perm()|0o700); err != nil {
			return fmt.Errorf("embedded postgres: chmod %s: %w", c.dir, err)
		}
	}
	sock := filepath.Join(c.dir, "run")
	if len(sock)+len("/.s.PGSQL.")+5 > maxSocketPath {
		// Deep data dirs overflow sun_path; a short, per-cluster name
		// under the temp dir keeps the socket reachable.
		sum := sha256.Sum256([]byte(c.dir))
		sock = filepath.Join(os.TempDir(), "berth-pg-"+hex.EncodeToString(sum[:6]))
		if len(sock)+len("/.s.PGSQL.")+5 > maxSocketPath {
			return wire.Errorf(wire.CodeBadRequest, "embedded postgres: socket directory %s is too long for a unix socket path", sock)
		}
	}
	if err := c.makeSocketDir(sock); err != nil {
		return err
	}
	c.sockDir = sock
	return nil
}

// makeSocketDir creates the socket directory mode 0700. A directory under
// a shared temp dir is only trusted when it belongs to the account, so
// nobody else can plant a socket there.
func (c *Cluster) makeSocketDir(sock string) error {
	err := os.Mkdir(sock, 0o700)
	created := err == nil
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("embedded postgres: create socket directory %s: %w", sock, err)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		return fmt.Errorf("embedded postgres: stat %s: %w", sock, err)
	}
	if !fi.IsDir() {
		return wire.Errorf(wire.CodeBadRequest, "embedded postgres: socket path %s exists and is not a directory", sock)
	}
	if !c.as.owns(fi) {
		if !created && !strings.HasPrefix(sock, c.dir+string(filepath.Separator)) {
			return wire.Errorf(wire.CodeConflict, "embedded postgres: socket directory %s belongs to another user: remove it", sock)
		}
		if err := c.as.chown(sock); err != nil {
			return err
		}
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(sock, 0o700); err != nil {
			return fmt.Errorf("embedded postgres: chmod %s: %w", sock, err)
		}
	}
	return nil
}
