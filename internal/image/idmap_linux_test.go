//go:build linux

package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIdmappedOverlayOfCachedLayers checks, on this kernel, what the
// local runtime's mounting will do with an Image: each layer directory
// (the image's own ids, host root for uid 0) mounted idmapped onto a
// sandbox's uid block (open_tree + mount_setattr MOUNT_ATTR_IDMAP),
// read-only, nosuid, nodev, as overlayfs lower layers under a writable
// upper. Inside a user namespace mapped like a sandbox, the image's root
// owns its files, whiteouts and opaque directories hide the lower
// layers' files, and what the sandbox writes lands in the upper owned by
// the block's ids.
func TestIdmappedOverlayOfCachedLayers(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	home := dir("home/user/")
	home.Uid, home.Gid = 1000, 1000
	owned := file("home/user/file", "mine\n")
	owned.Uid, owned.Gid = 1000, 1000
	rootfs := gzLayer(t, hostRootfs(t))
	lower := gzLayer(t, tarOf(t, file("etc/os", "lower\n"), dir("home/"), home, owned, file("gone", "x"),
		dir("dir/"), file("dir/old", "x")))
	upper := gzLayer(t, tarOf(t, file(".wh.gone", ""), dir("dir/"), file("dir/.wh..wh..opq", ""), file("dir/new", "y")))
	r.Push(t, "overlay:1", imageSpec{}, rootfs, lower, upper)
	img, err := c.Ensure(context.Background(), r.Host+"/overlay:1", Pull{})
	if err != nil {
		t.Fatal(err)
	}

	// The layers as unpacked: a whiteout device, an opaque directory.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(img.Layers[2], "gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("gone in the top layer: %+v, %v; want a 0/0 character device", st, err)
	}
	for _, x := range []string{opaqueXattrTrusted, opaqueXattrUser} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(filepath.Join(img.Layers[2], "dir"), x, buf)
		if err != nil || string(buf[:n]) != "y" {
			t.Fatalf("dir's %s = %q, %v; want y", x, buf[:n], err)
		}
	}

	// A block far from the local runtime's.
	const base = 1<<30 + 5*idsPerSandbox
	work := t.TempDir()
	done := make(chan error)
	go func() {
		// The thread dies with its mount namespace: nothing of this test
		// is mounted in the host's.
		runtime.LockOSThread()
		done <- overlayInNamespace(img, work, base)
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func overlayInNamespace(img Image, work string, base int) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: idsPerSandbox}}
	// A user namespace mapped like a sandbox's, held by a process.
	holder := exec.Command("/bin/sleep", "600")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids}
	if err := holder.Start(); err != nil {
		return fmt.Errorf("start the user namespace's holder: %w", err)
	}
	defer holder.Wait()
	defer holder.Process.Kill()
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(userns)

	var lowers []string
	for i, l := range img.Layers {
		target := filepath.Join(work, fmt.Sprintf("lower%d", i))
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, l, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("open_tree layer %d: %w", i, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
			Userns_fd: uint64(userns)}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("mount_setattr MOUNT_ATTR_IDMAP on layer %d (this kernel cannot idmap the cache's filesystem): %w", i, err)
		}
		err = unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("move_mount layer %d: %w", i, err)
		}
		lowers = append([]string{target}, lowers...) // overlayfs: topmost first
	}
	upper, wdir, merged := filepath.Join(work, "upper"), filepath.Join(work, "work"), filepath.Join(work, "merged")
	for _, d := range []string{upper, wdir, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(upper, base, base); err != nil {
		return err
	}
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + wdir
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount overlayfs over idmapped layers: %w", err)
	}

	// From the host: the image's ids shifted onto the block.
	for p, want := range map[string]int{"etc/os": base, "home/user/file": base + 1000, "bin/bash": base} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(merged, p), &st); err != nil {
			return err
		}
		if int(st.Uid) != want || int(st.Gid) != want {
			return fmt.Errorf("%s in the overlay is %d:%d, want %d", p, st.Uid, st.Gid, want)
		}
	}
	for p, want := range map[string]bool{"gone": false, "dir/old": false, "dir/new": true, "etc/os": true} {
		_, err := os.Lstat(filepath.Join(merged, p))
		if (err == nil) != want {
			return fmt.Errorf("%s in the overlay: %v, want present=%v", p, err, want)
		}
	}

	// From inside, as the sandbox's root.
	sh := exec.Command("/bin/bash", "-c", `[ -O /etc/os ] && echo hi > /etc/new && echo more >> /home/user/file && echo ok`)
	sh.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: ids, GidMappings: ids,
		Chroot: merged, Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}}
	sh.Dir, sh.Env = "/", []string{"PATH=/usr/bin:/bin"}
	out, err := sh.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		return fmt.Errorf("bash as the sandbox's root in the overlay: %v: %q", err, out)
	}
	for p, want := range map[string]int{"etc/new": base, "home/user/file": base + 1000} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(upper, p), &st); err != nil {
			return fmt.Errorf("%s in the upper: %w", p, err)
		}
		if int(st.Uid) != want {
			return fmt.Errorf("%s in the upper is owned by %d, want %d", p, st.Uid, want)
		}
	}
	// The layers themselves are unchanged.
	if b, _ := os.ReadFile(filepath.Join(img.Layers[1], "home/user/file")); string(b) != "mine\n" {
		return fmt.Errorf("the cached layer changed: %q", b)
	}
	return nil
}
