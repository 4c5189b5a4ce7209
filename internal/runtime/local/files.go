//go:build linux

package local

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Berth's control files (pid records, slot claims, logs) live only in
// directories the sandboxes cannot reach, and are still opened without
// following symlinks: a path berth handles with its own privileges must
// never be redirected.

// checkPrivateDir refuses a directory that is a symlink, belongs to
// someone else, or that others may write.
func checkPrivateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory (a symlink?); refusing to keep sandbox control files there", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to berth (uid %d); refusing to keep sandbox control files there", dir, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %o); refusing to keep sandbox control files there", dir, st.Mode&0o777)
	}
	return nil
}

// mkdirPrivate creates dir (one level) owned by berth with the given mode,
// or checks the one that exists.
func mkdirPrivate(dir string, mode os.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil && !os.IsExist(err) {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	return checkPrivateDir(dir)
}

func writeFileNoFollow(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readFileNoFollow(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
