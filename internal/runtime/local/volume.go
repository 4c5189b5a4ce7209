//go:build linux

package local

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/runtime"
)

// A sandbox's files live on a volume of their own: an ext4 image
// <server dir>/volume.img, loop-mounted at <server dir>/volume. Its size
// is the sandbox's disk limit, and all of it is allocated on the host
// when the volume is made (allocate), so writing into the volume never
// needs more of the host: a full volume is ENOSPC inside the sandbox, and
// what the sandbox was told it wrote is on the host's disk whatever else
// fills it. The volume survives agent restarts and host reboots, and
// deleting a sandbox is unmounting it and removing one file, without
// walking a tree the sandbox shaped. The volume holds
//
//	workspace/  the sandbox's, owned by its root, bound at /workspace
//	berth/      berth's (root, 0700): the agent's log, written through a
//	            descriptor, so the log too is bounded by the volume
const (
	volumeImage = "volume.img"
	volumeDir   = "volume"
	wsSubdir    = "workspace"
	berthSubdir = "berth"
	agentLog    = "agent.log"
)

// mkfsPath finds mkfs.ext4, which sbin-less PATHs miss.
func mkfsPath() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("mkfs.ext4 not found (Debian: apt-get install e2fsprogs)")
}

// ensureVolume makes sure the server directory's volume exists and is
// mounted. A new volume gets its layout and, through seed, its first
// files, all owned by owner (the sandbox's root) before any sandbox code
// runs on it.
func (r *Runtime) ensureVolume(space *diskSpace, dir string, size int64, owner int, seed func(ws string) error) error {
	img := filepath.Join(dir, volumeImage)
	mnt := filepath.Join(dir, volumeDir)
	if err := mkdirPrivate(mnt, 0o700); err != nil {
		return fmt.Errorf("volume mount point: %w", err)
	}
	if _, err := os.Lstat(img); err == nil {
		// Made sparse by an older berth, or given holes since: allocated
		// whole before the sandbox writes into it again.
		if err := allocate(space, img); err != nil {
			return err
		}
		return mountVolume(img, mnt)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Built under a temporary name: a crash halfway leaves no volume that
	// looks complete.
	tmp := img + ".new"
	if mounted, _ := isMountPoint(mnt); mounted {
		unmount(mnt)
	}
	os.Remove(tmp)
	// Checked first, so that a host without the room refuses the volume
	// by its size, not by a blank image that could not be formatted.
	if err := space.check(size, volumeWhat(size)); err != nil {
		return err
	}
	err := r.makeImage(tmp, size)
	if err == nil {
		err = allocate(space, tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := mountVolume(tmp, mnt); err != nil {
		os.Remove(tmp)
		return err
	}
	err = layoutVolume(mnt, owner, seed)
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		unmount(mnt)
		os.Remove(tmp)
		return fmt.Errorf("new volume: %w", err)
	}
	return nil
}

// makeImage makes a fresh, empty volume image of size bytes at path: a
// sparse copy of a blank image formatted once per size, since formatting
// takes tens of milliseconds and copying the few megabytes of a blank
// file system's metadata a few.
func (r *Runtime) makeImage(path string, size int64) error {
	blank, err := r.blankImage(size)
	if err != nil {
		return err
	}
	if err := sparseCopy(blank, path, size); err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	return nil
}

// blankImage returns the blank image of size bytes, formatting it first
// if needed. It lives in <data-dir>/volumes, berth's alone.
func (r *Runtime) blankImage(size int64) (string, error) {
	r.blankMu.Lock()
	defer r.blankMu.Unlock()
	dir := filepath.Join(r.opts.DataDir, "volumes")
	if err := mkdirPrivate(dir, 0o700); err != nil {
		return "", fmt.Errorf("volume images: %w", err)
	}
	blank := filepath.Join(dir, fmt.Sprintf("blank-%d.img", size))
	if _, err := os.Lstat(blank); err == nil {
		return blank, nil
	}
	// A name of its own: another runtime on this data directory may be
	// formatting the same size now; either result is a good blank.
	tmp := blank + ".new-" + rand.Text()[:8]
	if err := r.format(tmp, size); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return blank, os.Rename(tmp, blank)
}

func (r *Runtime) format(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	// No reserved blocks: they would be reserved for host root, which is
	// never the sandbox. Lazy init keeps formatting quick and the blank
	// small (its inode tables are holes, copied as holes); the volume is
	// mounted noinit_itable, so they are never zeroed later either (see
	// mountOptions).
	out, err := exec.Command(r.mkfs, "-q", "-F", "-m", "0", "-L", "berth",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// allocate gives the image at path all its blocks on the host now, as
// preallocated (unwritten) extents that read as zeros, keeping the data
// it has: the loop device then writes only into space the image owns. What
// it lacks (all but the blank's metadata for a new image; the holes of
// one made by an older berth) is taken from space.
func allocate(space *diskSpace, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("volume image: %w", err)
	}
	missing := st.Size - st.Blocks*512
	if missing <= 0 {
		return nil
	}
	what := volumeWhat(st.Size)
	release, err := space.take(missing, what)
	if err != nil {
		return err
	}
	defer release()
	err = unix.Fallocate(int(f.Fd()), 0, 0, st.Size)
	switch {
	case errors.Is(err, unix.ENOSPC):
		return space.refusal(missing, what)
	case errors.Is(err, unix.EOPNOTSUPP):
		return errors.New("allocate the workspace volume: the data directory's filesystem cannot preallocate files (fallocate); put berth's data directory on ext4, XFS or tmpfs")
	case err != nil:
		return fmt.Errorf("allocate the workspace volume: %w", err)
	}
	return nil
}

func volumeWhat(size int64) string {
	return "a " + runtime.FormatBytes(size) + " workspace volume"
}

// sparseCopy copies src's data extents to a new file dst of size bytes,
// leaving holes as holes.
func sparseCopy(src, dst string, size int64) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	err = copyExtents(int(in.Fd()), int(out.Fd()))
	if err == nil {
		err = out.Truncate(size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func copyExtents(in, out int) error {
	var pos int64
	for {
		start, err := unix.Seek(in, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		end, err := unix.Seek(in, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		for off := start; off < end; {
			roff, woff := off, off
			n, err := unix.CopyFileRange(in, &roff, out, &woff, int(end-off), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			off += int64(n)
		}
		pos = end
	}
}

func layoutVolume(mnt string, owner int, seed func(ws string) error) error {
	if err := mkdirPrivate(filepath.Join(mnt, berthSubdir), 0o700); err != nil {
		return err
	}
	ws := filepath.Join(mnt, wsSubdir)
	if err := seed(ws); err != nil {
		return fmt.Errorf("seed workspace: %w", err)
	}
	// Only berth's template is in the tree yet, so walking it is safe.
	return filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, owner, owner)
	})
}

// mountVolume mounts the image at mnt unless it is mounted there already.
// An image that some loop device already backs (mounted in another mount
// namespace by an earlier berth) is mounted from that device: two loop
// devices on one ext4 image would corrupt it.
func mountVolume(img, mnt string) error {
	mounted, err := isMountPoint(mnt)
	if err != nil {
		return err
	}
	if mounted {
		// Mounted by an earlier berth, which may not have kept it
		// allocated.
		if dev := existingLoop(img); dev != "" {
			return keepAllocated(dev)
		}
		return nil
	}
	dev, hold, err := loopFor(img)
	if err != nil {
		return err
	}
	// An autoclear device detaches when its last opener closes it: hold
	// it open until the mount holds it.
	defer hold.Close()
	if err := unix.Mount(dev, mnt, "ext4", unix.MS_NOSUID|unix.MS_NODEV, mountOptions); err != nil {
		return fmt.Errorf("mount volume %s: %w", img, err)
	}
	if err := keepAllocated(dev); err != nil {
		unmount(mnt)
		return fmt.Errorf("volume %s: %w", img, err)
	}
	return nil
}

// The loop device turns a discard, and a "write zeroes" that may
// deallocate, into a hole punched in the image: host space given back,
// which the volume would need again the next time the sandbox writes
// there, when the host may have none left. So nothing may send either:
//   - the volume is mounted nodiscard (no discard on delete) and the
//     loop device takes no discard at all (discard_max_bytes 0; FITRIM
//     needs host root anyway);
//   - ext4 never zeroes a range through the device: its inode tables are
//     left as they are (noinit_itable: they were holes in the blank, and
//     read as zeros from the allocated image), and a partly written
//     preallocated extent is split rather than zeroed
//     (extent_max_zeroout_kb 0).
const mountOptions = "nodiscard,noinit_itable"

// keepAllocated sets dev's and its mounted volume's knobs (above).
func keepAllocated(dev string) error {
	name := filepath.Base(dev)
	for _, knob := range []string{
		filepath.Join("/sys/block", name, "queue", "discard_max_bytes"),
		filepath.Join("/sys/fs/ext4", name, "extent_max_zeroout_kb"),
	} {
		if err := os.WriteFile(knob, []byte("0"), 0); err != nil {
			return fmt.Errorf("keep the volume allocated: %w", err)
		}
	}
	return nil
}

// loopFor returns a loop device backed by img, open, attaching a new one
// with autoclear (it detaches itself when its last user goes) if none is.
func loopFor(img string) (string, *os.File, error) {
	if dev := existingLoop(img); dev != "" {
		f, err := openLoop(dev)
		return dev, f, err
	}
	f, err := os.OpenFile(img, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("volume image: %w", err)
	}
	defer f.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop devices: %w", err)
	}
	defer ctl.Close()
	// Another process may take the free device between asking and
	// configuring it; then ask again.
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := openLoop(dev)
		if err != nil {
			return "", nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], img)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("attach %s to %s: %w", img, dev, err)
		}
	}
	return "", nil, errors.New("no free loop device after 20 attempts")
}

// openLoop opens a loop device node, waiting briefly for udev-less hosts
// where devtmpfs creates the node just after LOOP_CTL_GET_FREE.
func openLoop(dev string) (*os.File, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		f, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil || !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", dev, err)
			}
			return f, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// existingLoop finds a loop device whose backing file is img.
func existingLoop(img string) string {
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err == nil && strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(m)))
		}
	}
	return ""
}

// isMountPoint reports whether dir is the root of a mount: its device
// differs from its parent's (the volume is never a bind of its parent).
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// unmount unmounts mnt, lazily if something still holds it (a sandbox's
// mount namespace that is just going away).
func unmount(mnt string) error {
	err := unix.Unmount(mnt, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(mnt, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
	return nil
}
