package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// maxSeedDepth bounds how deep an image's /workspace may nest to be
// copied into a new workspace.
const maxSeedDepth = 256

// seedWorkspace copies the image's /workspace, the directory src of the
// image's root, into the new workspace (the detached mount on
// WorkspaceFD) before it is mounted over it: a sandbox's workspace starts
// as its image's, which is where a build keeps what it made there. It
// runs as the sandbox's root on the sandbox's own files, with nothing of
// the sandbox running yet; still, the image is hostile, so no symlink is
// followed (each entry is opened relative to its directory with
// O_NOFOLLOW), only directories, regular files and symlinks are copied,
// setuid bits are not, and the copy is bounded by the workspace volume
// and by maxSeedDepth.
func seedWorkspace(src string) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("seed the workspace from the image's %s: %w", WorkspaceDir, err)
	}
	defer unix.Close(sfd)
	if err := seedDir(sfd, WorkspaceFD, "", 0); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("seed the workspace from the image's %s: it does not fit the sandbox's disk: %w", WorkspaceDir, err)
		}
		return fmt.Errorf("seed the workspace from the image's %s: %w", WorkspaceDir, err)
	}
	return nil
}

func seedDir(src, dst int, rel string, depth int) error {
	if depth >= maxSeedDepth {
		return fmt.Errorf("%s is nested more than %d directories deep", path.Join(WorkspaceDir, rel), maxSeedDepth)
	}
	dup, err := unix.Dup(src)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), rel)
	defer d.Close()
	for {
		names, rerr := d.Readdirnames(1024)
		for _, name := range names {
			if err := seedEntry(src, dst, name, path.Join(rel, name), depth); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func seedEntry(src, dst int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	uid, gid := int(st.Uid), int(st.Gid)
	times := []unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		s, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer unix.Close(s)
		if err := unix.Mkdirat(dst, name, 0o700); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		d, err := unix.Openat(dst, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		defer unix.Close(d)
		if err := seedDir(s, d, rel, depth+1); err != nil {
			return err
		}
		// Set last: a read-only directory is still filled first.
		return errors.Join(unix.Fchown(d, uid, gid), unix.Fchmod(d, st.Mode&0o3777),
			unix.UtimesNanoAt(dst, name, times, unix.AT_SYMLINK_NOFOLLOW))
	case unix.S_IFREG:
		in, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		inF := os.NewFile(uintptr(in), rel)
		defer inF.Close()
		out, err := unix.Openat(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		outF := os.NewFile(uintptr(out), rel)
		defer outF.Close()
		if _, err := io.Copy(outF, inF); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return errors.Join(unix.Fchown(out, uid, gid), unix.Fchmod(out, st.Mode&0o777),
			unix.UtimesNanoAt(dst, name, times, unix.AT_SYMLINK_NOFOLLOW))
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(src, name, buf)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := unix.Symlinkat(string(buf[:n]), dst, name); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return errors.Join(unix.Fchownat(dst, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW),
			unix.UtimesNanoAt(dst, name, times, unix.AT_SYMLINK_NOFOLLOW))
	}
	return nil // nothing else is a workspace's
}
