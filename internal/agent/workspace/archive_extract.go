package workspace

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// ExtractArchive unpacks a tar archive (gzip-compressed or not) read from
// src into directory p, creating it if missing. Every entry is checked
// before anything is written: names must be relative and stay inside the
// destination, symlinks and hard links must point inside the workspace
// (inside the destination with AllowOutside), and only files,
// directories and links are accepted. Once the file data passes the
// archive size limit extraction stops with wire.CodeTooLarge. On an error
// the entries extracted so far remain; nothing is ever written outside.
func (w *Workspace) ExtractArchive(ctx context.Context, p string, src io.Reader) (wire.FileResult, error) {
	t, err := w.resolve(p)
	if err != nil {
		return wire.FileResult{}, err
	}
	if err := w.fs.MkdirAll(t.name, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "extract into %s: not a directory", t.disp)
		}
		return wire.FileResult{}, fsError("extract into", t.disp, err)
	}
	x := extractor{ctx: ctx, disp: t.disp, max: w.maxArch, buf: make([]byte, copyChunk)}
	if w.outside {
		// Plain os calls would follow any symlink an archive plants, so
		// even unconfined extraction goes through a root, at the
		// destination.
		real, err := filepath.EvalSymlinks(t.name)
		if err != nil {
			return wire.FileResult{}, fsError("extract into", t.disp, err)
		}
		root, err := os.OpenRoot(real)
		if err != nil {
			return wire.FileResult{}, fsError("extract into", t.disp, err)
		}
		defer root.Close()
		x.fs, x.base, x.limit = root, ".", real
	} else {
		x.fs, x.base, x.limit = w.root, t.name, w.rootPath
	}
	in, err := decompress(src)
	if err != nil {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "extract into %s: %w", t.disp, err)
	}
	if err := x.run(tar.NewReader(in)); err != nil {
		return wire.FileResult{Path: t.disp, Bytes: x.total}, err
	}
	return wire.FileResult{Path: t.disp, Bytes: x.total}, nil
}

// decompress looks at the first bytes and unwraps gzip if present.
func decompress(src io.Reader) (io.Reader, error) {
	br := bufio.NewReader(src)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read gzip header: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

type extractor struct {
	ctx  context.Context
	fs   fsys
	base string // destination, as a name for fs
	// limit is the absolute real directory that names given to fs are
	// relative to and that every link must stay inside.
	limit string
	disp  string
	max   int64
	total int64
	buf   []byte
	// lockedDirs are directories whose archived mode denies the owner
	// access; they get it only after their contents are written.
	lockedDirs []dirMode
}

type dirMode struct {
	name string
	mode fs.FileMode
}

func (x *extractor) run(tr *tar.Reader) error {
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return wire.Errorf(wire.CodeBadRequest, "extract into %s: read archive: %w", x.disp, err)
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
	// Deepest first, so a locked parent does not block its children.
	for i := len(x.lockedDirs) - 1; i >= 0; i-- {
		d := x.lockedDirs[i]
		if err := x.fs.Chmod(d.name, d.mode); err != nil {
			return x.fail(d.name, err)
		}
	}
	return nil
}

// clean validates an archive name and returns it relative to the
// destination.
func (x *extractor) clean(what, name string) (string, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", wire.Errorf(wire.CodeBadRequest, "extract into %s: %s %q is not a valid name", x.disp, what, name)
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return "", wire.Errorf(wire.CodeForbidden, "extract into %s: %s %q is an absolute path", x.disp, what, name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", wire.Errorf(wire.CodeForbidden, "extract into %s: %s %q escapes the destination", x.disp, what, name)
	}
	return c, nil
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	rel, err := x.clean("entry", hdr.Name)
	if err != nil {
		return err
	}
	name := filepath.Join(x.base, filepath.FromSlash(rel))
	if rel == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil
		}
		return wire.Errorf(wire.CodeBadRequest, "extract into %s: entry %q names the destination itself", x.disp, hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(name, rel, hdr)
	case tar.TypeReg:
		return x.file(tr, name, rel, hdr)
	case tar.TypeSymlink:
		return x.symlink(name, rel, hdr)
	case tar.TypeLink:
		return x.hardlink(name, rel, hdr)
	default:
		return wire.Errorf(wire.CodeBadRequest, "extract into %s: entry %q has unsupported type %q (only files, directories and links)", x.disp, hdr.Name, string(hdr.Typeflag))
	}
}

func (x *extractor) fail(name string, err error) error {
	var coded *wire.ErrorDetail
	if errors.As(err, &coded) {
		return err
	}
	return fsError("extract", x.display(name), err)
}

// display names an fs path for messages, relative to the workspace when
// confined.
func (x *extractor) display(name string) string {
	if x.base == "." {
		return filepath.Join(x.disp, name)
	}
	return name
}

func (x *extractor) dir(name, rel string, hdr *tar.Header) error {
	mode := fs.FileMode(hdr.Mode) & fs.ModePerm
	fi, err := x.fs.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		if err := x.fs.Remove(name); err != nil {
			return x.fail(name, err)
		}
		fallthrough
	default:
		if err := x.fs.MkdirAll(name, 0o700); err != nil {
			return x.fail(name, err)
		}
	}
	if mode&0o700 != 0o700 {
		x.lockedDirs = append(x.lockedDirs, dirMode{name: name, mode: mode})
		mode |= 0o700
	}
	if err := x.fs.Chmod(name, mode); err != nil {
		return x.fail(name, err)
	}
	return nil
}

// prepare makes the parent of name and clears whatever non-directory is
// in the way, as tar does.
func (x *extractor) prepare(name, rel string) error {
	if err := x.fs.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return x.fail(filepath.Dir(name), err)
	}
	fi, err := x.fs.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return x.fail(name, err)
	}
	if fi.IsDir() {
		return wire.Errorf(wire.CodeConflict, "extract into %s: entry %q would replace a directory", x.disp, rel)
	}
	if err := x.fs.Remove(name); err != nil {
		return x.fail(name, err)
	}
	return nil
}

func (x *extractor) file(tr *tar.Reader, name, rel string, hdr *tar.Header) error {
	if hdr.Size < 0 || x.total+hdr.Size > x.max {
		return wire.Errorf(wire.CodeTooLarge, "extract into %s: archive holds more than the %d byte limit (at entry %q)", x.disp, x.max, rel)
	}
	x.total += hdr.Size
	if err := x.prepare(name, rel); err != nil {
		return err
	}
	f, err := x.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return x.fail(name, err)
	}
	err = copyN(x.ctx, f, tr, hdr.Size, x.buf)
	if err == nil {
		err = f.Chmod(fs.FileMode(hdr.Mode) & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return wire.Errorf(wire.CodeBadRequest, "extract into %s: entry %q: archive is truncated", x.disp, rel)
		}
		return x.fail(name, err)
	}
	if !hdr.ModTime.IsZero() {
		if err := x.fs.Chtimes(name, time.Time{}, hdr.ModTime); err != nil {
			return x.fail(name, err)
		}
	}
	return nil
}

func (x *extractor) symlink(name, rel string, hdr *tar.Header) error {
	link := hdr.Linkname
	if link == "" || strings.IndexByte(link, 0) >= 0 {
		return wire.Errorf(wire.CodeBadRequest, "extract into %s: symlink %q has an invalid target %q", x.disp, rel, link)
	}
	if err := x.prepare(name, rel); err != nil {
		return err
	}
	// Resolve where the link would point from its real parent directory,
	// since earlier entries may have made that parent a symlink itself.
	realParent, err := filepath.EvalSymlinks(filepath.Join(x.limit, filepath.Dir(name)))
	if err != nil {
		return x.fail(filepath.Dir(name), err)
	}
	abs := link
	if !filepath.IsAbs(link) {
		abs = filepath.Join(realParent, link)
	}
	if _, ok := within(x.limit, filepath.Clean(abs)); !ok {
		return wire.Errorf(wire.CodeForbidden, "extract into %s: symlink %q points to %q, outside the workspace", x.disp, rel, link)
	}
	if err := x.fs.Symlink(link, name); err != nil {
		return x.fail(name, err)
	}
	return nil
}

func (x *extractor) hardlink(name, rel string, hdr *tar.Header) error {
	old, err := x.clean("hard link target", hdr.Linkname)
	if err != nil {
		return err
	}
	oldName := filepath.Join(x.base, filepath.FromSlash(old))
	fi, err := x.fs.Lstat(oldName)
	if err != nil {
		return x.fail(oldName, err)
	}
	if fi.IsDir() {
		return wire.Errorf(wire.CodeBadRequest, "extract into %s: hard link %q points to directory %q", x.disp, rel, hdr.Linkname)
	}
	if err := x.prepare(name, rel); err != nil {
		return err
	}
	if err := x.fs.Link(oldName, name); err != nil {
		return x.fail(name, err)
	}
	return nil
}
