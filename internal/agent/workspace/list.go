package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// DefaultMaxEntries caps a listing when the caller gives no limit.
const DefaultMaxEntries = 10000

// List describes a directory's entries sorted by name. Recursive listing
// walks depth-first, each directory's entries right after it, and does not
// descend into symlinked directories. At most maxEntries entries are
// returned (0 = 10000); Truncated says more exist. Listing a file returns
// that file alone.
func (w *Workspace) List(ctx context.Context, path string, recursive bool, maxEntries int) (wire.ListResult, error) {
	t, err := w.resolve(path)
	if err != nil {
		return wire.ListResult{}, err
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	res := wire.ListResult{Path: t.disp, Entries: []wire.FileEntry{}}
	fi, err := w.fs.Stat(t.name)
	if err != nil {
		return res, fsError("ls", t.disp, err)
	}
	if !fi.IsDir() {
		li, err := w.fs.Lstat(t.name)
		if err != nil {
			return res, fsError("ls", t.disp, err)
		}
		res.Entries = append(res.Entries, w.entry(t.name, t.disp, li))
		return res, nil
	}
	l := lister{w: w, ctx: ctx, max: maxEntries, recursive: recursive, res: &res}
	if err := l.walk(t.name, t.disp, true); err != nil {
		return res, err
	}
	return res, nil
}

type lister struct {
	w         *Workspace
	ctx       context.Context
	max       int
	recursive bool
	res       *wire.ListResult
}

// walk appends the entries of one directory. Errors below the top
// directory (an unreadable subdirectory) leave that subtree out rather than
// failing the whole listing.
func (l *lister) walk(name, disp string, top bool) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	infos, err := readDir(l.w.fs, name)
	if err != nil {
		if top {
			return fsError("ls", disp, err)
		}
		return nil
	}
	for _, fi := range infos {
		if len(l.res.Entries) >= l.max {
			l.res.Truncated = true
			return nil
		}
		childName := filepath.Join(name, fi.Name())
		childDisp := joinDisp(disp, fi.Name())
		l.res.Entries = append(l.res.Entries, l.w.entry(childName, childDisp, fi))
		if l.recursive && fi.IsDir() {
			if err := l.walk(childName, childDisp, false); err != nil {
				return err
			}
			if l.res.Truncated {
				return nil
			}
		}
	}
	return nil
}

// readDir returns a directory's entries (lstat'ed, so symlinks stay
// symlinks) sorted by name.
func readDir(fsys fsys, name string) ([]fs.FileInfo, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	infos, err := f.Readdir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b fs.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return infos, nil
}

func joinDisp(dir, name string) string {
	if dir == "." {
		return name
	}
	return filepath.Join(dir, name)
}

func (w *Workspace) entry(name, disp string, fi fs.FileInfo) wire.FileEntry {
	e := wire.FileEntry{
		Name:    fi.Name(),
		Path:    disp,
		Type:    fileType(fi.Mode()),
		Size:    fi.Size(),
		Mode:    fmt.Sprintf("%04o", fi.Mode().Perm()),
		ModTime: fi.ModTime().UTC().Format(time.RFC3339Nano),
	}
	if disp == "." {
		e.Name = "."
	}
	if e.Type == "symlink" {
		if target, err := w.fs.Readlink(name); err == nil {
			e.Target = target
		}
	}
	return e
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "other"
	}
}
