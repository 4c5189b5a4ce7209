//go:build linux

package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A build's new layer is made from directories a sandbox wrote: the
// upper directory of its overlayfs root (what it changed of its image)
// and its workspace. The sandbox shaped both, so they are read the way
// unpacking writes: through descriptors, every directory opened with
// O_NOFOLLOW relative to its parent and every file opened O_NOFOLLOW and
// checked to be the entry that was looked at, so no symlink the sandbox
// made is ever followed. What the layer may hold:
//   - directories, regular files and symlinks (a symlink as its text);
//   - files the tree has under several names, as tar hard links to the
//     first, so the layer keeps the link and no content twice;
//   - in an upper directory, overlayfs's own marks, turned into OCI's: a
//     0/0 character device is a whiteout (`.wh.<name>`), a directory with
//     trusted.overlay.opaque=y is opaque (`.wh..wh..opq`).
//
// Refused (the build fails naming the entry): other devices, FIFOs (as the
// workspace template copy refuses them), a directory overlayfs redirects
// or a file it copied up as metadata only (their content is elsewhere),
// and trees past the bounds (entries, declared bytes with a sparse file
// counting whole, depth). Neutralised: setuid bits, and setgid bits on
// anything but a directory, are stripped (a sandbox's image may run
// elsewhere, where they would work), extended attributes are left out, and
// owners outside the sandbox's id block become nobody. Skipped: sockets,
// which hold nothing once their process is gone.

// Tree is one directory tree of a layer.
type Tree struct {
	// Dir is the tree's root, an open directory (not O_PATH: it is read).
	Dir *os.File
	// At is where the tree goes in the image: "" for the root, else a
	// clean relative path ("workspace").
	At string
	// Upper says the tree is an overlayfs upper directory, whose
	// whiteouts and opaque directories become OCI's.
	Upper bool
	// Opaque makes the tree replace whatever lower layers have at At.
	Opaque bool
	// Skip are names directly under Dir left out with all they hold.
	Skip []string
}

// DiffLimits bound and shape a layer made from trees.
type DiffLimits struct {
	// IDBase is the host uid (and gid) that is 0 in the image: the
	// sandbox's id block starts there and holds idsPerSandbox ids.
	IDBase int
	// MaxEntries and MaxBytes bound the entries and the declared bytes of
	// the files (a sparse file counts whole); MaxDepth the nesting.
	MaxEntries int64
	MaxBytes   int64
	MaxDepth   int
}

// DefaultMaxDepth bounds how deep a tree read into a layer may nest.
const DefaultMaxDepth = 256

// DiffResult is what reading trees into a layer found.
type DiffResult struct {
	Entries int64
	Bytes   int64 // declared bytes of the files
	Notes   []string
}

// DiffRefused is a tree berth will not make a layer of: the build's to
// fix, named in its message.
type DiffRefused struct{ msg string }

func (e *DiffRefused) Error() string { return e.msg }

func diffRefused(format string, args ...any) error {
	return &DiffRefused{fmt.Sprintf(format, args...)}
}

// Overlayfs's marks in an upper directory.
const (
	overlayRedirect = "trusted.overlay.redirect"
	overlayMetacopy = "trusted.overlay.metacopy"
)

// differ is one WriteDiff.
type differ struct {
	ctx     context.Context
	tw      *tar.Writer
	lim     DiffLimits
	res     DiffResult
	links   map[[2]uint64]string // (dev, ino) -> first name in the layer
	buf     []byte
	sockets []string

	stripped, remapped int
}

// WriteDiff writes the trees, in order, to w as the tar of one layer.
func WriteDiff(ctx context.Context, w io.Writer, trees []Tree, lim DiffLimits) (DiffResult, error) {
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultMaxDepth
	}
	d := &differ{ctx: ctx, tw: tar.NewWriter(w), lim: lim, links: map[[2]uint64]string{}, buf: make([]byte, 1<<20)}
	for _, t := range trees {
		if err := d.tree(t); err != nil {
			return d.res, err
		}
	}
	if err := d.tw.Close(); err != nil {
		return d.res, err
	}
	if d.stripped > 0 {
		d.note("%d setuid/setgid bits stripped", d.stripped)
	}
	if d.remapped > 0 {
		d.note("%d entries owned by ids outside the sandbox's now belong to nobody", d.remapped)
	}
	if len(d.sockets) > 0 {
		d.note("sockets skipped (they hold nothing once their process is gone): %v", d.sockets)
	}
	return d.res, nil
}

func (d *differ) note(format string, args ...any) {
	if len(d.res.Notes) < maxNotes {
		d.res.Notes = append(d.res.Notes, fmt.Sprintf(format, args...))
	}
}

func (d *differ) tree(t Tree) error {
	fd := int(t.Dir.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("layer tree %s is not a directory", t.Dir.Name())
	}
	if t.At != "" {
		if err := d.header(t.At, &st, tar.TypeDir, ""); err != nil {
			return err
		}
		if t.Opaque {
			if err := d.marker(path.Join(t.At, opaqueMarker)); err != nil {
				return err
			}
		}
	}
	return d.dir(fd, t.At, 1, t.Upper, t.Skip)
}

// dir writes the entries of the directory fd, whose name in the layer is
// rel, in name order.
func (d *differ) dir(fd int, rel string, depth int, upper bool, skip []string) error {
	if depth > d.lim.MaxDepth {
		return diffRefused("/%s is nested more than %d directories deep", rel, d.lim.MaxDepth)
	}
	if err := d.ctx.Err(); err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("read /%s: %w", rel, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "." || name == ".." || slices.Contains(skip, name) {
			continue
		}
		if err := d.entry(fd, name, path.Join(rel, name), depth, upper); err != nil {
			return err
		}
	}
	return nil
}

func (d *differ) entry(dirFd int, name, rel string, depth int, upper bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("/%s: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		if len(d.sockets) < 10 {
			d.sockets = append(d.sockets, "/"+rel)
		}
		return nil
	}
	if d.res.Entries++; d.res.Entries > d.lim.MaxEntries {
		return diffRefused("more than %d files and directories (the limit of an image)", d.lim.MaxEntries)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return d.subdir(dirFd, name, rel, depth, upper, &st)
	case unix.S_IFREG:
		return d.file(dirFd, name, rel, upper, &st)
	case unix.S_IFLNK:
		buf := make([]byte, pathMax+1)
		n, err := unix.Readlinkat(dirFd, name, buf)
		if err != nil {
			return fmt.Errorf("/%s: %w", rel, err)
		}
		if n > pathMax {
			return diffRefused("/%s is a symlink whose target is over %d bytes", rel, pathMax)
		}
		return d.header(rel, &st, tar.TypeSymlink, string(buf[:n]))
	case unix.S_IFCHR:
		if upper && st.Rdev == 0 {
			// overlayfs's whiteout: the image's file of that name is
			// deleted.
			return d.marker(path.Join(path.Dir(rel), whiteoutPrefix+name))
		}
	}
	return diffRefused("/%s is a %s; an image keeps only regular files, directories and symlinks: remove it in a last command",
		rel, kindOfMode(st.Mode))
}

func kindOfMode(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("file of type %o", mode&unix.S_IFMT)
}

// openEntry opens name in dirFd without following it and checks it is the
// entry st looked at.
func openEntry(dirFd int, name, rel string, flags int, st *unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(dirFd, name, flags|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("/%s: %w", rel, err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if got.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT || got.Ino != st.Ino || got.Dev != st.Dev {
		unix.Close(fd)
		return nil, diffRefused("/%s changed while it was read", rel)
	}
	*st = got
	return os.NewFile(uintptr(fd), rel), nil
}

// hasXattr says whether the file fd has the extended attribute x.
func hasXattr(fd int, x string) (bool, []byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(fd, x, buf)
	switch {
	case err == nil:
		return true, buf[:n], nil
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP):
		return false, nil, nil
	case errors.Is(err, unix.ERANGE):
		return true, nil, nil
	}
	return false, nil, err
}

func (d *differ) subdir(dirFd int, name, rel string, depth int, upper bool, st *unix.Stat_t) error {
	f, err := openEntry(dirFd, name, rel, unix.O_DIRECTORY, st)
	if err != nil {
		return err
	}
	defer f.Close()
	opaque := false
	if upper {
		if ok, _, err := hasXattr(int(f.Fd()), overlayRedirect); err != nil || ok {
			return errors.Join(err, diffRefused("/%s is a directory overlayfs renamed in place (redirect_dir), whose files are elsewhere; berth cannot make a layer of it", rel))
		}
		ok, v, err := hasXattr(int(f.Fd()), opaqueXattrTrusted)
		if err != nil {
			return fmt.Errorf("/%s: %w", rel, err)
		}
		opaque = ok && string(v) == "y"
	}
	if err := d.header(rel, st, tar.TypeDir, ""); err != nil {
		return err
	}
	if opaque {
		if err := d.marker(path.Join(rel, opaqueMarker)); err != nil {
			return err
		}
	}
	return d.dir(int(f.Fd()), rel, depth+1, upper, nil)
}

func (d *differ) file(dirFd int, name, rel string, upper bool, st *unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if st.Nlink > 1 {
		if first, ok := d.links[key]; ok {
			return d.header(rel, st, tar.TypeLink, first)
		}
	}
	if d.res.Bytes+st.Size > d.lim.MaxBytes {
		return diffRefused("/%s: the image's new files add up to over %d bytes (a sparse file counts whole)", rel, d.lim.MaxBytes)
	}
	f, err := openEntry(dirFd, name, rel, 0, st)
	if err != nil {
		return err
	}
	defer f.Close()
	if upper {
		if ok, _, err := hasXattr(int(f.Fd()), overlayMetacopy); err != nil || ok {
			return errors.Join(err, diffRefused("/%s was copied up by overlayfs as metadata only (metacopy), its content is elsewhere; berth cannot make a layer of it", rel))
		}
	}
	if err := d.header(rel, st, tar.TypeReg, ""); err != nil {
		return err
	}
	// The sandbox is stopped, so the file keeps its size; a file that
	// ends early fails the tar writer, one that grew is cut.
	n, err := io.CopyBuffer(d.tw, io.LimitReader(f, st.Size), d.buf)
	if err != nil {
		return fmt.Errorf("/%s: %w", rel, err)
	}
	if n != st.Size {
		return diffRefused("/%s changed while it was read", rel)
	}
	d.res.Bytes += st.Size
	if st.Nlink > 1 {
		d.links[key] = rel
	}
	return nil
}

// header writes the tar header of the entry rel, which st describes.
func (d *differ) header(rel string, st *unix.Stat_t, typ byte, link string) error {
	mode := int64(st.Mode & 0o7777)
	strip := int64(unix.S_ISUID | unix.S_ISGID)
	if typ == tar.TypeDir {
		strip = unix.S_ISUID
	}
	if mode&strip != 0 && typ != tar.TypeSymlink {
		d.stripped++
	}
	mode &^= strip
	h := &tar.Header{Typeflag: typ, Name: rel, Linkname: link, Mode: mode, Uid: d.id(int(st.Uid), int(st.Gid)),
		Gid: d.gid(int(st.Gid)), ModTime: time.Unix(st.Mtim.Unix()).UTC(), Format: tar.FormatPAX}
	switch typ {
	case tar.TypeDir:
		h.Name += "/"
	case tar.TypeReg:
		h.Size = st.Size
	}
	if err := d.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("/%s: %w", rel, err)
	}
	return nil
}

// marker writes an empty OCI whiteout or opaque marker.
func (d *differ) marker(name string) error {
	return d.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, ModTime: time.Unix(0, 0).UTC(),
		Format: tar.FormatPAX})
}

// id and gid map host ids back to the image's: the sandbox's block starts
// at IDBase; anything else becomes nobody.
func (d *differ) id(uid, gid int) int {
	u := uid - d.lim.IDBase
	g := gid - d.lim.IDBase
	if u < 0 || u >= idsPerSandbox || g < 0 || g >= idsPerSandbox {
		d.remapped++
	}
	if u < 0 || u >= idsPerSandbox {
		return nobody
	}
	return u
}

func (d *differ) gid(gid int) int {
	g := gid - d.lim.IDBase
	if g < 0 || g >= idsPerSandbox {
		return nobody
	}
	return g
}
