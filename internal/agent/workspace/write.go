package workspace

import (
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// tempMarker is part of every temporary file name, so leftovers of a
// crashed agent are recognisable.
const tempMarker = ".berth-tmp-"

// Write replaces a file's content atomically: the content goes to a
// temporary file in the same directory, which is synced, given its mode and
// renamed over the target, so a reader sees the old or the new content and
// never a mix. A symlink at the target is followed (and must stay inside
// the workspace), so the link itself survives.
func (w *Workspace) Write(ctx context.Context, req wire.WriteFileRequest) (wire.FileResult, error) {
	mode, err := parseMode(req.Mode)
	if err != nil {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "write %s: %w", req.Path, err)
	}
	if int64(len(req.Content)) > w.maxWrite {
		return wire.FileResult{}, wire.Errorf(wire.CodeTooLarge, "write %s: content of %d bytes is over the %d byte limit", req.Path, len(req.Content), w.maxWrite)
	}
	t, err := w.resolve(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	if w.isRootOrAbove(t) {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "write %s: is a directory", t.disp)
	}
	if err := ctx.Err(); err != nil {
		return wire.FileResult{}, err
	}
	if err := w.ensureParent("write", t, req.MakeParents); err != nil {
		return wire.FileResult{}, err
	}
	real, err := w.resolveLinks(t)
	if err != nil {
		return wire.FileResult{}, err
	}
	if fi, err := w.fs.Stat(real.name); err == nil && fi.IsDir() {
		return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "write %s: is a directory", t.disp)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wire.FileResult{}, fsError("write", t.disp, err)
	}
	if err := w.replaceFile(real, []byte(req.Content), mode); err != nil {
		return wire.FileResult{}, err
	}
	return wire.FileResult{Path: t.disp, Bytes: int64(len(req.Content)), Lines: countLines(req.Content)}, nil
}

// ensureParent checks that t's directory exists, creating it when asked.
func (w *Workspace) ensureParent(op string, t target, create bool) error {
	parent := filepath.Dir(t.name)
	fi, err := w.fs.Stat(parent)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return wire.Errorf(wire.CodeBadRequest, "%s %s: parent %s is not a directory", op, t.disp, filepath.Dir(t.disp))
	case errors.Is(err, fs.ErrNotExist) && !create:
		return wire.Errorf(wire.CodeNotFound, "%s %s: parent directory %s does not exist (set make_parents to create it)", op, t.disp, filepath.Dir(t.disp))
	case errors.Is(err, fs.ErrNotExist):
		if err := w.fs.MkdirAll(parent, 0o755); err != nil {
			return fsError(op, t.disp, err)
		}
		return nil
	default:
		return fsError(op, t.disp, err)
	}
}

// replaceFile writes data to a temporary sibling of t and renames it over
// t. The temporary file is removed on every failure.
func (w *Workspace) replaceFile(t target, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Dir(t.name), filepath.Base(t.name)
	tmp := filepath.Join(dir, "."+base+tempMarker+rand.Text()[:12])
	f, err := w.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError("write", t.disp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			w.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fsError("write", t.disp, err)
	}
	if err := f.Sync(); err != nil {
		return fsError("sync", t.disp, err)
	}
	// Chmod on the open file is not subject to the umask, unlike the
	// permission given to OpenFile.
	if err := f.Chmod(mode); err != nil {
		return fsError("chmod", t.disp, err)
	}
	if err := f.Close(); err != nil {
		return fsError("write", t.disp, err)
	}
	if w.beforeRename != nil {
		if err := w.beforeRename(t.name); err != nil {
			return err
		}
	}
	if err := w.fs.Rename(tmp, t.name); err != nil {
		return fsError("rename", t.disp, err)
	}
	// Syncing the directory makes the rename itself durable; not every
	// file system supports it, and the data is already safe, so a failure
	// here is not reported.
	if d, err := w.fs.OpenFile(dir, os.O_RDONLY, 0); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// parseMode parses an octal permission string; empty means 0644.
func parseMode(s string) (fs.FileMode, error) {
	if s == "" {
		return 0o644, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || v > 0o777 {
		return 0, wire.Errorf(wire.CodeBadRequest, "mode %q: want an octal permission from 0000 to 0777", s)
	}
	return fs.FileMode(v), nil
}

func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
