//go:build linux

package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a layer's tar may say and what berth makes of it. A layer is
// unpacked on its own into an empty directory that only berth can reach,
// through descriptors: every directory on an entry's way is opened with
// O_NOFOLLOW relative to its parent, so no symlink the layer made is ever
// followed, and the last component is created with O_EXCL|O_NOFOLLOW (or
// the *at call that does not follow). Refused (the whole layer fails, its
// directory is removed): a name that climbs out of the layer (`..`), a
// name longer than PATH_MAX, an entry under a symlink or a file of the
// layer, a hard link to anything but a file of this layer, a whiteout of
// the layer's root, and entries or bytes past the image's budget.
// Neutralised: an absolute name is taken relative to the layer (as tar
// does); setuid and setgid bits are stripped (the files are owned by
// host root, see Image); extended attributes (file capabilities, ACLs,
// overlay's own xattrs) are dropped; ids past a sandbox's 65536 become
// nobody. Skipped, with a note: device nodes (a sandbox's /dev is its own,
// and a node in a shared layer would be a door to a host device) and
// FIFOs (a shared read-only layer has no use for one, and a sandbox can
// make its own).

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	// The overlayfs whiteout is a character device 0/0; an opaque
	// directory carries overlay's xattr. Both namespaces are written so
	// that the mount may be made by berth (trusted.) or, with
	// `userxattr`, inside a user namespace (user.).
	opaqueXattrTrusted = "trusted.overlay.opaque"
	opaqueXattrUser    = "user.overlay.opaque"

	pathMax = 4096
	// idsPerSandbox is the local runtime's uid block: ids past it map to
	// nothing inside a sandbox.
	idsPerSandbox = 65536
	nobody        = 65534
)

type dirMeta struct {
	uid, gid int
	mode     uint32
	mtime    time.Time
}

type unpacker struct {
	root   int // the layer's root directory, O_PATH
	budget *budget
	res    unpacked

	dirs     map[string]dirMeta
	dirOrder []string
	skipped  map[string]bool
	stripped int
	xattrs   int
	remapped int

	// The last parent directory resolved, for the runs of siblings a tar
	// has; dropped whenever anything is removed.
	lastDir   string
	lastDirFd int

	buf []byte
}

// unpackLayer unpacks the tar r into the empty directory rootFd.
func unpackLayer(ctx context.Context, r io.Reader, rootFd int, b *budget) (unpacked, error) {
	u := &unpacker{root: rootFd, budget: b, dirs: map[string]dirMeta{}, skipped: map[string]bool{},
		lastDirFd: -1, buf: make([]byte, 1<<20)}
	defer u.dropDir()
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return u.res, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return u.res, fmt.Errorf("read the layer's tar after %d entries: %w", u.res.Entries, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return u.res, err
		}
	}
	if err := u.finishDirs(); err != nil {
		return u.res, err
	}
	if u.stripped > 0 {
		u.res.note("%d setuid/setgid bits stripped", u.stripped)
	}
	if u.xattrs > 0 {
		u.res.note("extended attributes of %d entries dropped", u.xattrs)
	}
	if u.remapped > 0 {
		u.res.note("%d entries owned by ids past %d now belong to nobody", u.remapped, idsPerSandbox-1)
	}
	return u.res, nil
}

// cleanName makes a tar name relative to the layer; "" is the root.
func cleanName(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("the name has a NUL byte")
	}
	if len(name) > pathMax {
		return "", fmt.Errorf("the name is %d bytes, over %d", len(name), pathMax)
	}
	c := path.Clean(strings.TrimLeft(name, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("the name climbs out of the layer")
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

func (u *unpacker) entry(hdr *tar.Header, tr *tar.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return refuse(hdr.Name, "%v", err)
	}
	if err := u.budget.take(1, max(hdr.Size, 0)); err != nil {
		return refuse(hdr.Name, "%v", err)
	}
	u.res.Entries++
	u.res.Bytes += max(hdr.Size, 0)
	if len(hdr.PAXRecords) > 0 {
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") || strings.HasPrefix(k, "LIBARCHIVE.xattr.") {
				u.xattrs++
				break
			}
		}
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")

	switch {
	case base == opaqueMarker:
		return u.opaque(hdr.Name, dir)
	case strings.HasPrefix(base, whiteoutPrefix+whiteoutPrefix):
		u.res.note("entry %q: AUFS metadata skipped", hdr.Name)
		return nil
	case strings.HasPrefix(base, whiteoutPrefix):
		target := strings.TrimPrefix(base, whiteoutPrefix)
		if target == "" || target == "." || target == ".." {
			return refuse(hdr.Name, "a whiteout of the layer's root (or of nothing)")
		}
		return u.whiteout(hdr.Name, dir, target)
	}

	if name == "" {
		if hdr.Typeflag != tar.TypeDir {
			return refuse(hdr.Name, "the layer's root is not a directory")
		}
		u.remember("", hdr)
		return nil
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.mkdir(hdr, dir, base, name)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeCont:
		return u.file(hdr, tr, dir, base)
	case tar.TypeSymlink:
		return u.symlink(hdr, dir, base)
	case tar.TypeLink:
		return u.hardlink(hdr, dir, base, name)
	case tar.TypeChar, tar.TypeBlock:
		u.skipped[name] = true
		u.res.note("entry %q: device node skipped", hdr.Name)
		return nil
	case tar.TypeXGlobalHeader:
		return nil // PAX defaults for the entries after it, already applied
	case tar.TypeFifo:
		u.skipped[name] = true
		u.res.note("entry %q: FIFO skipped", hdr.Name)
		return nil
	default:
		u.skipped[name] = true
		u.res.note("entry %q: tar type %q skipped", hdr.Name, hdr.Typeflag)
		return nil
	}
}

// ids are the entry's owners as a sandbox can map them.
func (u *unpacker) ids(hdr *tar.Header) (int, int) {
	uid, gid := hdr.Uid, hdr.Gid
	if uid < 0 || uid >= idsPerSandbox || gid < 0 || gid >= idsPerSandbox {
		u.remapped++
		if uid < 0 || uid >= idsPerSandbox {
			uid = nobody
		}
		if gid < 0 || gid >= idsPerSandbox {
			gid = nobody
		}
	}
	return uid, gid
}

// mode is the entry's permission bits without setuid, and without
// setgid but on a directory (where it only picks new files' group).
func (u *unpacker) mode(hdr *tar.Header) uint32 {
	m := uint32(hdr.Mode) & 0o7777
	strip := uint32(unix.S_ISUID | unix.S_ISGID)
	if hdr.Typeflag == tar.TypeDir {
		strip = unix.S_ISUID
	}
	if m&strip != 0 {
		u.stripped++
		m &^= strip
	}
	return m
}

// parent opens the directory dir of the layer, creating missing
// directories (root's, 0755) when create is set. The descriptor belongs
// to u until the next call.
func (u *unpacker) parent(entry, dir string, create bool) (int, error) {
	if dir == u.lastDir && u.lastDirFd >= 0 {
		return u.lastDirFd, nil
	}
	u.dropDir()
	fd, err := unix.Openat(u.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the layer's root: %w", err)
	}
	walked := ""
	for c := range strings.SplitSeq(dir, "/") {
		if c == "" {
			continue
		}
		walked = path.Join(walked, c)
		next, err := u.step(fd, entry, walked, c, create)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	u.lastDir, u.lastDirFd = dir, fd
	return fd, nil
}

// step opens c in the directory fd, never through a symlink.
func (u *unpacker) step(fd int, entry, walked, c string, create bool) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	next, err := unix.Openat(fd, c, flags, 0)
	if err == nil {
		return next, nil
	}
	switch {
	case errors.Is(err, unix.ENOENT) && create:
		if err := unix.Mkdirat(fd, c, 0o755); err != nil {
			return -1, refuse(entry, "create directory %q: %v", walked, err)
		}
	case errors.Is(err, unix.ENOENT):
		return -1, refuse(entry, "%q is not in this layer", walked)
	case errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
		var st unix.Stat_t
		if serr := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil {
			return -1, refuse(entry, "inspect %q: %v", walked, serr)
		}
		if !create || !isWhiteout(&st) {
			return -1, refuse(entry, "%q is a %s in this layer, not a directory; berth does not write through it", walked, kind(st.Mode))
		}
		// A whiteout, then entries under the same name: the layer deleted
		// the lower directory and made a new one, which is an opaque one.
		if err := unix.Unlinkat(fd, c, 0); err != nil {
			return -1, refuse(entry, "replace the whiteout %q: %v", walked, err)
		}
		if err := unix.Mkdirat(fd, c, 0o755); err != nil {
			return -1, refuse(entry, "create directory %q: %v", walked, err)
		}
		if err := setOpaque(fd, c); err != nil {
			return -1, refuse(entry, "mark %q opaque: %v", walked, err)
		}
	default:
		return -1, refuse(entry, "open %q: %v", walked, err)
	}
	next, err = unix.Openat(fd, c, flags, 0)
	if err != nil {
		return -1, refuse(entry, "open %q: %v", walked, err)
	}
	return next, nil
}

func (u *unpacker) dropDir() {
	if u.lastDirFd >= 0 {
		unix.Close(u.lastDirFd)
	}
	u.lastDir, u.lastDirFd = "", -1
}

func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFCHR:
		return "character device"
	default:
		return "special file"
	}
}

// clear makes room for a new entry base in dirFd: it reports whether a
// directory is already there (kept when keepDir is set), and removes
// anything else, as a later tar entry replaces an earlier one.
func (u *unpacker) clear(entry string, dirFd int, base string, keepDir bool) (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirFd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, refuse(entry, "inspect: %v", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if keepDir {
			return true, nil
		}
		if err := removeAllAt(dirFd, base); err != nil {
			return false, refuse(entry, "replace the directory: %v", err)
		}
		u.dropDirUnder()
		return false, nil
	}
	if err := unix.Unlinkat(dirFd, base, 0); err != nil {
		return false, refuse(entry, "replace: %v", err)
	}
	return false, nil
}

// dropDirUnder makes the next lookup walk again: the cached parent may
// have been under what was removed. Its descriptor stays open until then,
// for the caller may be using it.
func (u *unpacker) dropDirUnder() {
	u.lastDir = "\x00"
}

func (u *unpacker) remember(name string, hdr *tar.Header) {
	uid, gid := u.ids(hdr)
	if _, ok := u.dirs[name]; !ok {
		u.dirOrder = append(u.dirOrder, name)
	}
	u.dirs[name] = dirMeta{uid: uid, gid: gid, mode: u.mode(hdr), mtime: hdr.ModTime}
}

func (u *unpacker) mkdir(hdr *tar.Header, dir, base, name string) error {
	fd, err := u.parent(hdr.Name, dir, true)
	if err != nil {
		return err
	}
	exists, err := u.clear(hdr.Name, fd, base, true)
	if err != nil {
		return err
	}
	if !exists {
		if err := unix.Mkdirat(fd, base, 0o700); err != nil {
			return refuse(hdr.Name, "create: %v", err)
		}
	}
	u.remember(name, hdr)
	return nil
}

func (u *unpacker) file(hdr *tar.Header, tr *tar.Reader, dir, base string) error {
	dirFd, err := u.parent(hdr.Name, dir, true)
	if err != nil {
		return err
	}
	// Created at once, as nearly every entry is new; something already
	// there (O_EXCL fails even on a symlink) is removed, then it is made.
	const create = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirFd, base, create, 0o600)
	if errors.Is(err, unix.EEXIST) {
		if _, err := u.clear(hdr.Name, dirFd, base, false); err != nil {
			return err
		}
		fd, err = unix.Openat(dirFd, base, create, 0o600)
	}
	if err != nil {
		return refuse(hdr.Name, "create: %v", err)
	}
	defer unix.Close(fd)
	var written int64
	for {
		n, rerr := tr.Read(u.buf)
		if n > 0 {
			if err := writeAll(fd, u.buf[:n]); err != nil {
				return refuse(hdr.Name, "write: %v", err)
			}
			written += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return refuse(hdr.Name, "read: %v", rerr)
		}
	}
	if written != hdr.Size {
		return refuse(hdr.Name, "holds %d bytes, its header says %d", written, hdr.Size)
	}

	uid, gid := u.ids(hdr)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return refuse(hdr.Name, "chown: %v", err)
	}
	if err := unix.Fchmod(fd, u.mode(hdr)); err != nil {
		return refuse(hdr.Name, "chmod: %v", err)
	}
	if err := futimens(fd, hdr.ModTime); err != nil {
		return refuse(hdr.Name, "set times: %v", err)
	}
	u.res.DiskBytes += (hdr.Size + 4095) &^ 4095
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

// futimens sets the times of the open file fd (utimensat with no path,
// as C's futimens): no lookup by name, and nanoseconds, where
// unix.Futimes goes through /proc/self/fd with microseconds.
func futimens(fd int, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	times := [2]unix.Timespec{ts, ts}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&times[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func setTimes(dirFd int, base string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(dirFd, base, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

func (u *unpacker) symlink(hdr *tar.Header, dir, base string) error {
	if strings.IndexByte(hdr.Linkname, 0) >= 0 || hdr.Linkname == "" || len(hdr.Linkname) > pathMax {
		return refuse(hdr.Name, "symlink target is empty, over %d bytes or has a NUL byte", pathMax)
	}
	fd, err := u.parent(hdr.Name, dir, true)
	if err != nil {
		return err
	}
	if _, err := u.clear(hdr.Name, fd, base, false); err != nil {
		return err
	}
	// The target is text the sandbox reads through its own root; berth
	// never resolves it.
	if err := unix.Symlinkat(hdr.Linkname, fd, base); err != nil {
		return refuse(hdr.Name, "create symlink: %v", err)
	}
	uid, gid := u.ids(hdr)
	if err := unix.Fchownat(fd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return refuse(hdr.Name, "chown: %v", err)
	}
	if err := setTimes(fd, base, hdr.ModTime); err != nil {
		return refuse(hdr.Name, "set times: %v", err)
	}
	return nil
}

func (u *unpacker) hardlink(hdr *tar.Header, dir, base, name string) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return refuse(hdr.Name, "hard link target %q: %v", hdr.Linkname, err)
	}
	if target == "" {
		return refuse(hdr.Name, "a hard link to the layer's root")
	}
	if u.skipped[target] {
		u.skipped[name] = true
		u.res.note("entry %q: hard link to skipped %q skipped", hdr.Name, hdr.Linkname)
		return nil
	}
	tdir, tbase := path.Split(target)
	// The target's directory gets its own descriptor: parent's is reused
	// for the link's.
	tfd, err := u.openDir(hdr.Name, strings.TrimSuffix(tdir, "/"))
	if err != nil {
		var ee *entryError
		if errors.As(err, &ee) {
			return refuse(hdr.Name, "hard link to %q: %v", hdr.Linkname, ee.err)
		}
		return err
	}
	defer unix.Close(tfd)
	var tst unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &tst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return refuse(hdr.Name, "hard link to %q, which is not in this layer", hdr.Linkname)
		}
		return refuse(hdr.Name, "inspect hard link target %q: %v", hdr.Linkname, err)
	}
	if m := tst.Mode & unix.S_IFMT; m != unix.S_IFREG && m != unix.S_IFLNK {
		return refuse(hdr.Name, "hard link to %q, a %s of this layer; only files may be linked", hdr.Linkname, kind(tst.Mode))
	}
	fd, err := u.parent(hdr.Name, dir, true)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == tst.Ino && st.Dev == tst.Dev {
		return nil // the same link again
	}
	if _, err := u.clear(hdr.Name, fd, base, false); err != nil {
		return err
	}
	// Flags 0: a symlink target is linked itself, never followed.
	if err := unix.Linkat(tfd, tbase, fd, base, 0); err != nil {
		return refuse(hdr.Name, "hard link to %q: %v", hdr.Linkname, err)
	}
	return nil
}

// openDir opens an existing directory of the layer with its own
// descriptor, never through a symlink.
func (u *unpacker) openDir(entry, dir string) (int, error) {
	fd, err := unix.Openat(u.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the layer's root: %w", err)
	}
	walked := ""
	for c := range strings.SplitSeq(dir, "/") {
		if c == "" {
			continue
		}
		walked = path.Join(walked, c)
		next, err := u.step(fd, entry, walked, c, false)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func (u *unpacker) whiteout(entry, dir, target string) error {
	fd, err := u.parent(entry, dir, true)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, target, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		// Per the OCI spec a whiteout hides only lower layers: what this
		// layer has under that name stays, and already hides them.
		return nil
	}
	if err := unix.Mknodat(fd, target, unix.S_IFCHR, 0); err != nil {
		return refuse(entry, "create the whiteout: %v", err)
	}
	return nil
}

func (u *unpacker) opaque(entry, dir string) error {
	if dir == "" {
		u.res.RootOpaque = true
	}
	// parent of "dir/x" is dir itself: open it as the parent of a child.
	fd, err := u.parent(entry, dir, true)
	if err != nil {
		return err
	}
	if err := setOpaque(fd, "."); err != nil {
		return refuse(entry, "mark the directory opaque: %v", err)
	}
	return nil
}

// setOpaque marks the directory name (in dirFd) opaque for overlayfs.
func setOpaque(dirFd int, name string) error {
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, x := range []string{opaqueXattrTrusted, opaqueXattrUser} {
		if err := unix.Fsetxattr(fd, x, []byte("y"), 0); err != nil {
			return fmt.Errorf("set %s: %w", x, err)
		}
	}
	return nil
}

// finishDirs gives each directory its owner, mode and time, deepest
// first so that making a child does not move its parent's time again.
func (u *unpacker) finishDirs() error {
	u.dropDir()
	order := slices.Clone(u.dirOrder)
	slices.Reverse(order)
	for _, name := range order {
		m := u.dirs[name]
		var fd int
		var err error
		if name == "" {
			fd, err = unix.Openat(u.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		} else {
			dir, base := path.Split(name)
			var dfd int
			dfd, err = u.openDir(name, strings.TrimSuffix(dir, "/"))
			if err != nil {
				continue // replaced since by a file or a link: nothing to set
			}
			fd, err = unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			unix.Close(dfd)
			if err != nil {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("open the layer's root: %w", err)
		}
		err = errors.Join(unix.Fchown(fd, m.uid, m.gid), unix.Fchmod(fd, m.mode), futimens(fd, m.mtime))
		unix.Close(fd)
		if err != nil {
			return refuse(name, "set the directory's owner, mode and time: %v", err)
		}
		u.res.DiskBytes += 4096
	}
	return nil
}

// removeAllAt removes name in dirFd and everything under it, never
// following a symlink.
func removeAllAt(dirFd int, name string) error {
	err := unix.Unlinkat(dirFd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirFd, name, unix.AT_REMOVEDIR)
}

func readDirNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
