//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image"
)

// An image sandbox's root filesystem is an overlayfs berth makes
// detached, over detached idmapped clones of the cached layers, for the
// sandbox's init to attach. Linux 6.15 takes every layer as a
// descriptor (fsconfig FSCONFIG_SET_FD, detached mounts and O_PATH
// descriptors included), so nothing is ever mounted where anyone could
// see it. Older kernels (idmapped overlayfs layers came with 5.19) take
// layers by path only: there the layers are attached in a mount
// namespace of berth's own, private to one thread that ends with it, the
// overlay mounted there and cloned out detached. The first image start
// finds out which the kernel does.

// imageRootfs makes the root filesystem of a sandbox of img: its
// layers, each a detached clone mounted read-only, nosuid, nodev and
// idmapped through the user namespace userns (the sandbox's, mapped onto
// its uid block whose first uid is owner), under the upper directory on
// the sandbox's volume mounted at volume, as a detached overlayfs mount.
func (r *Runtime) imageRootfs(img *image.Image, volume string, userns, owner int) (*os.File, error) {
	dirs, err := openImageDirs(volume, owner)
	if err != nil {
		return nil, err
	}
	defer dirs.close()
	var lowers []int
	defer func() {
		for _, fd := range lowers {
			unix.Close(fd)
		}
	}()
	for i, dir := range img.Layers {
		fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %d: %w", img.Digest, i, err)
		}
		lowers = append(lowers, fd)
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
			Userns_fd: uint64(userns)}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return nil, fmt.Errorf("image %s: idmap layer %d onto the sandbox's uids (the kernel must support idmapped mounts of the image cache's filesystem, Linux 5.19 or later): %w", img.Digest, i, err)
		}
	}
	if !r.overlayByPath.Load() {
		root, err := overlayByDescriptors(lowers, dirs)
		if err == nil {
			return root, nil
		}
		root, perr := overlayByPaths(lowers, dirs)
		if perr != nil {
			return nil, fmt.Errorf("image root filesystem: %w (and by descriptors: %v)", perr, err)
		}
		r.overlayByPath.Store(true)
		r.log.Info("this kernel takes overlayfs layers by path only: image roots are mounted in a private mount namespace (Linux 6.15 takes them as descriptors)", "by_descriptors", err)
		return root, nil
	}
	root, err := overlayByPaths(lowers, dirs)
	if err != nil {
		return nil, fmt.Errorf("image root filesystem: %w", err)
	}
	return root, nil
}

// imageDirs are an image root's directories on the sandbox's volume,
// reached through a detached clone of <volume>/root: overlayfs shows its
// upper and work directories in the sandbox's mount table by their path
// in their mount, which is then /upper and /work rather than a path
// under berth's data directory.
type imageDirs struct {
	vol         int // the detached clone
	upper, work int // O_PATH, in vol
}

func (d imageDirs) close() {
	for _, fd := range []int{d.vol, d.upper, d.work} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// openImageDirs opens (making them the first time) the directories of an
// image root on the volume mounted at volume: <volume>/root (berth's,
// 0700) with the upper (the sandbox's /, its root's, 0755) and
// overlayfs's work directory in it.
func openImageDirs(volume string, owner int) (imageDirs, error) {
	d := imageDirs{vol: -1, upper: -1, work: -1}
	root := filepath.Join(volume, rootSubdir)
	if err := mkdirPrivate(root, 0o700); err != nil {
		return d, fmt.Errorf("image root filesystem: %w", err)
	}
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return d, fmt.Errorf("image root filesystem: %w", err)
	}
	defer unix.Close(dir)
	switch err := unix.Mkdirat(dir, upperSubdir, 0o755); {
	case err == nil:
		if err := unix.Fchownat(dir, upperSubdir, owner, owner, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return d, fmt.Errorf("image root filesystem: upper: %w", err)
		}
		if err := unix.Fchmodat(dir, upperSubdir, 0o755, 0); err != nil {
			return d, fmt.Errorf("image root filesystem: upper: %w", err)
		}
	case !errors.Is(err, unix.EEXIST):
		return d, fmt.Errorf("image root filesystem: upper: %w", err)
	}
	if err := unix.Mkdirat(dir, workSubdir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return d, fmt.Errorf("image root filesystem: work directory: %w", err)
	}
	if d.vol, err = unix.OpenTree(dir, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH); err != nil {
		return d, fmt.Errorf("image root filesystem: clone the volume's mount: %w", err)
	}
	if d.upper, err = unix.Openat(d.vol, upperSubdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		d.close()
		return d, fmt.Errorf("image root filesystem: upper: %w", err)
	}
	if d.work, err = unix.Openat(d.vol, workSubdir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		d.close()
		return d, fmt.Errorf("image root filesystem: work directory: %w", err)
	}
	return d, nil
}

// overlayByDescriptors mounts the overlay with every layer given as a
// descriptor (Linux 6.15).
func overlayByDescriptors(lowers []int, dirs imageDirs) (*os.File, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("overlayfs: %w", err)
	}
	defer unix.Close(fsfd)
	fail := func(what string, err error) (*os.File, error) {
		return nil, fmt.Errorf("overlayfs %s: %w%s", what, err, fsLog(fsfd))
	}
	// overlayfs stacks the first lower layer given on top.
	for i := len(lowers) - 1; i >= 0; i-- {
		if err := unix.FsconfigSetFd(fsfd, "lowerdir+", lowers[i]); err != nil {
			return fail("layer "+strconv.Itoa(i), err)
		}
	}
	if err := unix.FsconfigSetFd(fsfd, "upperdir", dirs.upper); err != nil {
		return fail("upper directory", err)
	}
	if err := unix.FsconfigSetFd(fsfd, "workdir", dirs.work); err != nil {
		return fail("work directory", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fail("mount", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail("mount", err)
	}
	return os.NewFile(uintptr(mfd), "rootfs"), nil
}

// overlayByPaths mounts the overlay with its layers given by path, as
// kernels before 6.15 need: in a mount namespace of its own, on a thread
// locked to it that ends with it, the layers and the volume's image
// directory are attached on a tmpfs over /tmp there, the overlay mounted
// on them and cloned out detached. Nothing of it is in berth's mount
// namespace; the overlay keeps private clones of its layers, so it
// outlives that namespace.
func overlayByPaths(lowers []int, dirs imageDirs) (*os.File, error) {
	// dirs.vol was cloned in berth's namespace, where the volume is
	// mounted (open_tree clones only mounts of the caller's namespace);
	// detached, it can be attached in the thread's.
	return onThrowawayThread(func() (*os.File, error) { return overlayInPrivateNamespace(lowers, dirs.vol) })
}

// onThrowawayThread runs fn on an OS thread of its own that ends with it,
// and with it whatever fn changed of the thread (its mount namespace).
// Go ends a thread whose goroutine exits locked to it, except the
// process's main thread, which it keeps: a goroutine that finds itself
// there holds the main thread while another does the work, on another
// thread, since a locked thread runs no other goroutine.
func onThrowawayThread(fn func() (*os.File, error)) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			f, err := onThrowawayThread(fn)
			goruntime.UnlockOSThread()
			ch <- result{f, err}
			return
		}
		// Never unlocked: the thread ends with the goroutine.
		f, err := fn()
		ch <- result{f, err}
	}()
	res := <-ch
	return res.f, res.err
}

// overlayInPrivateNamespace does overlayByPaths's work on its locked
// thread; lowers and vol (the volume's image directory) are detached
// mounts.
func overlayInPrivateNamespace(lowers []int, vol int) (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("a mount namespace to mount overlayfs in: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	const stage = "/tmp"
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=700,size=65536"); err != nil {
		return nil, fmt.Errorf("overlayfs staging: %w", err)
	}
	attach := func(fd int, name string) error {
		target := filepath.Join(stage, name)
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
		return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
	}
	paths := make([]string, len(lowers))
	for i := range lowers {
		// Moved, each layer's detached mount is attached here; overlayfs
		// stacks the first one named on top.
		name := "l" + strconv.Itoa(i)
		if err := attach(lowers[i], name); err != nil {
			return nil, fmt.Errorf("overlayfs layer %d: %w", i, err)
		}
		paths[len(lowers)-1-i] = filepath.Join(stage, name)
	}
	if err := attach(vol, "r"); err != nil {
		return nil, fmt.Errorf("overlayfs upper: %w", err)
	}
	merged := filepath.Join(stage, "m")
	if err := os.Mkdir(merged, 0o700); err != nil {
		return nil, err
	}
	opts := "lowerdir=" + strings.Join(paths, ":") + ",upperdir=" + filepath.Join(stage, "r", upperSubdir) +
		",workdir=" + filepath.Join(stage, "r", workSubdir)
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("overlayfs: %w", err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, merged, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("overlayfs: detach: %w", err)
	}
	// The clone holds what it needs; the namespace goes with the thread,
	// but should it outlive it, it holds nothing of the sandbox's.
	unix.Unmount(stage, unix.MNT_DETACH)
	return os.NewFile(uintptr(fd), "rootfs"), nil
}

// fsLog is what the filesystem context fsfd logged (overlayfs says there
// why it refused), as " (<messages>)", or "".
func fsLog(fsfd int) string {
	var msgs []string
	buf := make([]byte, 1024)
	for len(msgs) < 8 {
		n, err := unix.Read(fsfd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}
