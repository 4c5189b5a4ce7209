//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/runtime"
)

// No host path of berth's reaches a confined sandbox, nor a client
// through an error: where berth keeps its data says something of the host
// and is nobody's business but the operator's. Three things a sandbox can
// read name paths, and each is given a neutral one at its source:
//
//   - the open files it inherits (the agent's log, as its stdout and
//     stderr) are named at /proc/<pid>/fd by their path in their mount,
//     so the log is opened through a detached clone of its directory's
//     mount, where it is /agent.log;
//   - its mount table names each mount's root in its filesystem, so the
//     upstreams directory is a tmpfs of its own rather than a bind of a
//     directory of berth's;
//   - the agent's listening socket carries the path it was bound to
//     (getsockname, which the agent logs), so it is bound through a
//     descriptor of its directory, as /proc/self/fd/<n>/<name>.
//
// Errors the runtime returns, which reach clients as a failed start's or
// server's reason, have the paths under berth's directories replaced (see
// hideHostPaths); the full error goes to berth's log.

// openLogDetached opens the agent's log in dir through a detached clone
// of dir's mount.
func openLogDetached(dir string) (*os.File, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("agent log: clone its directory's mount: %w", err)
	}
	// The open file keeps the clone alive once tree is closed.
	defer unix.Close(tree)
	fd, err := unix.Openat(tree, agentLog, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	return os.NewFile(uintptr(fd), agentLog), nil
}

// upstreamsMount makes a sandbox's upstreams directory: a small tmpfs
// made detached (fsopen, fsmount) holding exactly the declarations of
// ups, then read-only, for the init to attach. It is in no directory of
// the host and goes with the sandbox's mount namespace.
func upstreamsMount(ups []runtime.Upstream) (*os.File, error) {
	files, err := runtime.UpstreamFiles(ups)
	if err != nil {
		return nil, err
	}
	size := 64 << 10
	for _, data := range files {
		size += len(data) + 4096
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("upstreams mount: %w", err)
	}
	defer unix.Close(fsfd)
	for _, kv := range [][2]string{{"size", strconv.Itoa(size)}, {"nr_inodes", strconv.Itoa(len(files) + 16)}, {"mode", "0755"}} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("upstreams mount: %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("upstreams mount: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("upstreams mount: %w", err)
	}
	mnt := os.NewFile(uintptr(mfd), "upstreams")
	for name, data := range files {
		if err := writeAt(mfd, name, data); err != nil {
			mnt.Close()
			return nil, fmt.Errorf("write upstream %s: %w", name, err)
		}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		mnt.Close()
		return nil, fmt.Errorf("upstreams mount read-only: %w", err)
	}
	return mnt, nil
}

// writeAt creates the file name in the directory dir with data, readable
// by all, whatever the umask.
func writeAt(dir int, name string, data []byte) error {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return fmt.Errorf("invalid file name %q", name)
	}
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	return errors.Join(err, f.Close())
}

// hiddenPath is what an error says instead of a path of berth's.
const hiddenPath = "(a file of berth's)"

// hideHostPaths returns err with every path under berth's data directory
// and socket directory replaced by hiddenPath, after logging it whole for
// the operator. The result still unwraps to err, so errors.Is and
// errors.As see what they saw.
func (r *Runtime) hideHostPaths(what, id string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	hidden := r.withoutHostPaths(msg)
	if hidden == msg {
		return err
	}
	r.log.Warn(what+" failed", "server_id", id, "err", msg)
	return &pathsHidden{msg: hidden, err: err}
}

// withoutHostPaths is s with every path under berth's data directory and
// socket directory replaced by hiddenPath.
func (r *Runtime) withoutHostPaths(s string) string {
	return r.hostPaths.ReplaceAllString(s, hiddenPath)
}

// hostPathsPattern matches a path under any of dirs, up to the next
// space, quote or colon.
func hostPathsPattern(dirs ...string) *regexp.Regexp {
	alts := make([]string, len(dirs))
	for i, d := range dirs {
		alts[i] = regexp.QuoteMeta(d)
	}
	return regexp.MustCompile(`(?:` + strings.Join(alts, "|") + `)[^\s"':]*`)
}

type pathsHidden struct {
	msg string
	err error
}

func (e *pathsHidden) Error() string { return e.msg }
func (e *pathsHidden) Unwrap() error { return e.err }
