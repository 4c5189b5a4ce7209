package workspace

import (
	"context"
	"errors"
	"io/fs"

	"github.com/berth-mcp/berth/internal/wire"
)

// Mkdir creates a directory (mode 0755). Without Parents the parent must
// exist and the directory must not; with Parents missing parents are made
// and an existing directory is fine.
func (w *Workspace) Mkdir(ctx context.Context, req wire.MkdirRequest) (wire.FileResult, error) {
	t, err := w.resolve(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return wire.FileResult{}, err
	}
	if req.Parents {
		if err := w.fs.MkdirAll(t.name, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				// MkdirAll reports an existing non-directory this way.
				return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "mkdir %s: exists and is not a directory", t.disp)
			}
			return wire.FileResult{}, fsError("mkdir", t.disp, err)
		}
		return wire.FileResult{Path: t.disp}, nil
	}
	if err := w.fs.Mkdir(t.name, 0o755); err != nil {
		switch {
		case errors.Is(err, fs.ErrExist):
			return wire.FileResult{}, wire.Errorf(wire.CodeConflict, "mkdir %s: already exists", t.disp)
		case errors.Is(err, fs.ErrNotExist):
			return wire.FileResult{}, wire.Errorf(wire.CodeNotFound, "mkdir %s: parent directory does not exist (set parents to create it)", t.disp)
		}
		return wire.FileResult{}, fsError("mkdir", t.disp, err)
	}
	return wire.FileResult{Path: t.disp}, nil
}

// Remove deletes a file, a symlink (never its target) or, with recursive,
// a directory tree. The workspace root itself is never removed.
func (w *Workspace) Remove(ctx context.Context, path string, recursive bool) (wire.FileResult, error) {
	t, err := w.resolve(path)
	if err != nil {
		return wire.FileResult{}, err
	}
	if w.isRootOrAbove(t) {
		return wire.FileResult{}, wire.Errorf(wire.CodeForbidden, "rm %s: refusing to remove the workspace root", t.disp)
	}
	if err := ctx.Err(); err != nil {
		return wire.FileResult{}, err
	}
	fi, err := w.fs.Lstat(t.name)
	if err != nil {
		return wire.FileResult{}, fsError("rm", t.disp, err)
	}
	if fi.IsDir() {
		if !recursive {
			return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "rm %s: is a directory (set recursive to remove it)", t.disp)
		}
		if err := w.fs.RemoveAll(t.name); err != nil {
			return wire.FileResult{}, fsError("rm", t.disp, err)
		}
		return wire.FileResult{Path: t.disp}, nil
	}
	if err := w.fs.Remove(t.name); err != nil {
		return wire.FileResult{}, fsError("rm", t.disp, err)
	}
	return wire.FileResult{Path: t.disp}, nil
}
