package workspace

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/berth-mcp/berth/internal/wire"
)

// WriteArchive streams a plain tar archive of a directory's contents (names
// relative to it) or of a single file (named by its base name) to dst.
// Symlinks are stored as symlinks; sockets, devices and FIFOs are left
// out. Errors before the first byte are coded; an error mid-stream leaves
// dst with a truncated archive.
func (w *Workspace) WriteArchive(ctx context.Context, p string, dst io.Writer) error {
	t, err := w.resolve(p)
	if err != nil {
		return err
	}
	fi, err := w.fs.Stat(t.name)
	if err != nil {
		return fsError("archive", t.disp, err)
	}
	a := archiver{w: w, ctx: ctx, tw: tar.NewWriter(dst), buf: make([]byte, copyChunk)}
	if fi.IsDir() {
		err = a.dir(t.name, t.disp, "")
	} else if fi.Mode().IsRegular() {
		err = a.add(t.name, t.disp, filepath.Base(t.name), fi)
	} else {
		return wire.Errorf(wire.CodeBadRequest, "archive %s: not a regular file or directory", t.disp)
	}
	if err != nil {
		return err
	}
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", t.disp, err)
	}
	return nil
}

type archiver struct {
	w   *Workspace
	ctx context.Context
	tw  *tar.Writer
	buf []byte
}

// dir writes the entries below directory name, depth-first in name order.
func (a *archiver) dir(name, disp, prefix string) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	infos, err := readDir(a.w.fs, name)
	if err != nil {
		return fsError("archive", disp, err)
	}
	for _, fi := range infos {
		childName := filepath.Join(name, fi.Name())
		childDisp := joinDisp(disp, fi.Name())
		entry := path.Join(prefix, fi.Name())
		if err := a.add(childName, childDisp, entry, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			if err := a.dir(childName, childDisp, entry); err != nil {
				return err
			}
		}
	}
	return nil
}

// add writes one entry; fi comes from Lstat so symlinks are not followed.
func (a *archiver) add(name, disp, entry string, fi fs.FileInfo) error {
	var link string
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		l, err := a.w.fs.Readlink(name)
		if err != nil {
			return fsError("archive", disp, err)
		}
		link = l
	case fi.IsDir(), fi.Mode().IsRegular():
	default:
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("archive %s: %w", disp, err)
	}
	hdr.Name = entry
	if fi.IsDir() {
		hdr.Name += "/"
	}
	// Owner names mean nothing on the receiving side and cost lookups.
	hdr.Uname, hdr.Gname = "", ""
	if !fi.Mode().IsRegular() {
		return a.writeHeader(disp, hdr)
	}
	f, size, err := a.w.openRegular("archive", target{name: name, disp: disp})
	if err != nil {
		return err
	}
	defer f.Close()
	// The header must carry the size the file has now; a file that grows
	// while it is read is cut at that size, one that shrinks fails.
	hdr.Size = size
	if err := a.writeHeader(disp, hdr); err != nil {
		return err
	}
	if err := copyN(a.ctx, a.tw, f, size, a.buf); err != nil {
		return fmt.Errorf("archive %s: %w", disp, err)
	}
	return nil
}

func (a *archiver) writeHeader(disp string, hdr *tar.Header) error {
	if err := a.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %s: %w", disp, err)
	}
	return nil
}
