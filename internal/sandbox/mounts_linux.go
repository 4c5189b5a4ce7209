package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// devices are the host device nodes a sandbox gets, the same set
// container runtimes give: harmless, and needed by ordinary programs.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildRoot assembles the sandbox's filesystem under newRoot and makes it
// the root: the host system read-only, the workspace read-write, private
// /tmp, /dev/shm, /dev and /proc, then pivot_root so that nothing else of
// the host stays reachable.
func buildRoot(spec Spec) error {
	// Nothing mounted here may reach back into the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if spec.ImageRoot {
		if err := attachImageRoot(); err != nil {
			return err
		}
		if spec.SeedWorkspace {
			if err := seedWorkspace(filepath.Join(newRoot, WorkspaceDir)); err != nil {
				return err
			}
		}
	} else if err := mountTmpfs(newRoot, 0o755, 1<<20); err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	if err := buildDev(); err != nil {
		return err
	}
	for _, d := range []string{"tmp", "dev/shm"} {
		if err := mountTmpfs(filepath.Join(newRoot, d), 0o1777, spec.TmpBytes); err != nil {
			return fmt.Errorf("private /%s: %w", d, err)
		}
	}
	if err := mountTmpfs(filepath.Join(newRoot, "run"), 0o755, 1<<20); err != nil {
		return fmt.Errorf("private /run: %w", err)
	}
	// Host paths come after the private mounts, so that one below /tmp
	// (say) is seen inside the private /tmp rather than hidden by it.
	if !spec.ImageRoot {
		for _, p := range spec.ReadOnly {
			if err := bindHostReadOnly(p); err != nil {
				return err
			}
		}
	}
	if err := bindWorkspace(); err != nil {
		return err
	}
	if err := bindUpstreams(spec.UpstreamsDir); err != nil {
		return err
	}
	if !spec.ImageRoot {
		// The host's /var stays out; programs that want /var/tmp get the
		// private /tmp. An image has a /var of its own.
		if err := os.MkdirAll(filepath.Join(newRoot, "var"), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/tmp", filepath.Join(newRoot, "var/tmp")); err != nil && !os.IsExist(err) {
			return err
		}
	}
	if err := mountProc(); err != nil {
		return err
	}
	if !spec.ImageRoot {
		for _, p := range spec.Hide {
			if err := hide(p); err != nil {
				return err
			}
		}
	}
	return pivot(!spec.ImageRoot)
}

// imageMountPoints are the directories of an image's root that berth
// mounts over: each must be a directory of the image's root itself.
var imageMountPoints = []string{"dev", "tmp", "run", "proc", strings.TrimPrefix(WorkspaceDir, "/")}

// attachImageRoot receives the image's root filesystem from berth and
// attaches it at newRoot. The image is hostile input: where it has a
// symlink or a file in place of a directory berth mounts over (/proc
// linking to /, say), the entry is replaced by an empty directory (in
// the sandbox's upper; the image's layers stay as they are), so that no
// mount below follows anything the image made. Nothing of the sandbox
// runs yet, so nothing changes the tree between the check and the mount.
func attachImageRoot() error {
	fd, err := receiveRoot()
	if err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, newRoot, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		unix.Close(fd)
		return fmt.Errorf("attach the image's root filesystem: %w", err)
	}
	unix.Close(fd)
	for _, name := range imageMountPoints {
		if err := realDir(filepath.Join(newRoot, name)); err != nil {
			return fmt.Errorf("image root: /%s: %w", name, err)
		}
	}
	return nil
}

// realDir makes p, whose parent is a directory berth controls, a real
// directory, replacing whatever else is there.
func realDir(p string) error {
	st, err := os.Lstat(p)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil:
		if err := os.Remove(p); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return os.Mkdir(p, 0o755)
}

// receiveRoot reads the one descriptor berth sends on RootFD.
func receiveRoot() (int, error) {
	defer unix.Close(RootFD)
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(RootFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("receive the image's root filesystem: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("receive the image's root filesystem: no descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("receive the image's root filesystem: want one descriptor (%v)", err)
	}
	return fds[0], nil
}

// mountTmpfs mounts a fresh tmpfs of at most size bytes at dir.
func mountTmpfs(dir string, mode os.FileMode, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	opts := fmt.Sprintf("mode=%o,size=%d", mode, size)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
	}
	return nil
}

// bindHostReadOnly makes the host path p visible at the same place inside
// the sandbox, read-only, with setuid bits and device files inert.
func bindHostReadOnly(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("read-only path %q: want a clean absolute path below /", p)
	}
	target := filepath.Join(newRoot, p)
	st, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read-only path %s: %w", p, err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		// usrmerge: /bin -> usr/bin. The link resolves inside the
		// sandbox's own root, where its target is bound too.
		link, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
		return os.Symlink(link, target)
	}
	if st.IsDir() {
		err = os.Mkdir(target, 0o755)
	} else {
		err = touch(target)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mount point for %s: %w", p, err)
	}
	if err := unix.Mount(p, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return remountTree(target, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// bindWorkspace attaches the workspace, which berth passed as a detached
// mount (writable, without setuid bits or devices), at WorkspaceDir.
func bindWorkspace() error {
	return attach(WorkspaceFD, WorkspaceDir, "workspace")
}

// attach moves the detached mount on fd to dir of the new root.
func attach(fd int, dir, what string) error {
	target := filepath.Join(newRoot, dir)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("%s mount point: %w", what, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach %s: %w", what, err)
	}
	return unix.Close(fd)
}

// bindUpstreams attaches the upstreams directory, which berth passed as a
// detached read-only mount of a directory only berth can write, at dir.
func bindUpstreams(dir string) error {
	if dir == "" {
		unix.Close(UpstreamsFD)
		return nil
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return fmt.Errorf("upstreams directory %q: want a clean absolute path below /", dir)
	}
	return attach(UpstreamsFD, dir, "upstreams directory")
}

// buildDev makes a minimal /dev: a few host device nodes, a private pty
// instance and the usual links.
func buildDev() error {
	dev := filepath.Join(newRoot, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		target := filepath.Join(dev, d)
		if err := touch(target); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
		if err := remountTree(target, unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
			return err
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// mountProc mounts a proc of the sandbox's own pid namespace, so it lists
// only the sandbox's processes, with /proc/sys read-only.
func mountProc() error {
	proc := filepath.Join(newRoot, "proc")
	if err := os.Mkdir(proc, 0o555); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// No nested user namespaces: they would hand a sandbox's process a
	// full capability set again, and with it the kernel's widest attack
	// surface. The limit is per user namespace and binds its children.
	if err := os.WriteFile(filepath.Join(proc, "sys/user/max_user_namespaces"), []byte("0\n"), 0); err != nil {
		return fmt.Errorf("forbid nested user namespaces: %w", err)
	}
	sys := filepath.Join(proc, "sys")
	if err := unix.Mount(sys, sys, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind /proc/sys: %w", err)
	}
	return remountTree(sys, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
}

// hide covers p, if the sandbox could see it, with an empty read-only
// tmpfs (a directory) or the null device (a file).
func hide(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("hidden path %q: want a clean absolute path below /", p)
	}
	target := filepath.Join(newRoot, p)
	st, err := os.Stat(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	if !st.IsDir() {
		if err := unix.Mount("/dev/null", target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
		return nil
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4096,mode=000"); err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	return nil
}

// pivot makes newRoot the root and detaches the host's root from the
// sandbox's mount namespace. With readOnly (the host system's root) it
// makes the root itself read-only, so that only the workspace and the
// tmpfs mounts take writes; an image's root stays writable, its writes
// going to the sandbox's upper on its volume.
func pivot(readOnly bool) error {
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on the new one; detaching
	// it then leaves only the new root.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the sandbox root read-only: %w", err)
	}
	return nil
}

// remountTree remounts the bind mount at target and every mount below it
// with the extra flags. A user namespace may not clear flags the host set
// on a mount (they are locked), so each mount keeps its own flags too.
func remountTree(target string, extra uintptr) error {
	mounts, err := mountsUnder(target)
	if err != nil {
		return err
	}
	for i, m := range mounts {
		var st unix.Statfs_t
		if err := unix.Statfs(m, &st); err != nil {
			if i > 0 && errors.Is(err, unix.EACCES) {
				// Below a directory the sandbox may not enter (another
				// user's, berth's): it cannot reach this mount either.
				continue
			}
			return fmt.Errorf("remount %s: %w", m, err)
		}
		flags := unix.MS_BIND | unix.MS_REMOUNT | extra | mountFlags(st.Flags)
		if err := unix.Mount("", m, "", flags, ""); err != nil {
			return fmt.Errorf("remount %s: %w", m, err)
		}
	}
	return nil
}

// mountFlags turns statfs flags into the mount flags that keep them.
func mountFlags(f int64) uintptr {
	var out uintptr
	for _, p := range []struct {
		st int64
		ms uintptr
	}{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if f&p.st != 0 {
			out |= p.ms
		}
	}
	return out
}

// mountsUnder lists target and the mount points below it, parents first.
func mountsUnder(target string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == target || strings.HasPrefix(mp, target+"/") {
			out = append(out, mp)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is not a mount point", target)
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func touch(p string) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
