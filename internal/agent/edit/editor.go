package edit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/berth-mcp/berth/internal/wire"
)

// DefaultMaxFileBytes is the size limit of a file the tools read or write
// when Editor.MaxFileBytes is 0.
const DefaultMaxFileBytes = 64 << 20

// Editor runs the file edit tools inside a workspace. Every path goes
// through Root, so no path, symlink or ".." can reach outside it.
type Editor struct {
	Root *os.Root
	// MaxFileBytes bounds the size of a file read or written; 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
}

func (e *Editor) limit() int64 {
	if e.MaxFileBytes > 0 {
		return e.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// CreateFile writes a file, creating its parent directories. It refuses
// to replace an existing file unless req.Overwrite is set; a replaced file
// keeps its mode and owner.
func (e *Editor) CreateFile(ctx context.Context, req wire.CreateFileRequest) (wire.FileResult, error) {
	if err := ctx.Err(); err != nil {
		return wire.FileResult{}, fmt.Errorf("create_file: %w", err)
	}
	name, err := cleanPath(req.Path)
	if err != nil {
		return wire.FileResult{}, err
	}
	if size := int64(len(req.Content)); size > e.limit() {
		return wire.FileResult{}, tooLarge(req.Path, size, e.limit())
	}
	target, fi, err := resolve(e.Root, name)
	spec := writeSpec{perm: 0o644, noReplace: !req.Overwrite}
	switch {
	case err == nil:
		if !req.Overwrite {
			return wire.FileResult{}, existsError(req.Path)
		}
		if fi.IsDir() {
			return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "%q is a directory, not a file", req.Path)
		}
		if !fi.Mode().IsRegular() {
			return wire.FileResult{}, wire.Errorf(wire.CodeBadRequest, "%q is not a regular file (%s)", req.Path, fi.Mode().Type())
		}
		spec.perm, spec.owner = keptMode(fi), fi
	case errors.Is(err, fs.ErrNotExist) && !isEscape(err):
		if dir := filepath.Dir(target); dir != "." {
			if err := e.Root.MkdirAll(dir, 0o755); err != nil {
				return wire.FileResult{}, fsError("create parent directories of", req.Path, err)
			}
		}
	default:
		return wire.FileResult{}, fsError("create", req.Path, err)
	}
	if err := writeAtomic(ctx, e.Root, target, req.Path, []byte(req.Content), spec); err != nil {
		return wire.FileResult{}, err
	}
	return e.result(name, []byte(req.Content)), nil
}

// EditFile replaces lines req.StartLine..req.EndLine of a file with
// req.NewContent, following EditLines.
func (e *Editor) EditFile(ctx context.Context, req wire.EditFileRequest) (wire.FileResult, error) {
	return e.rewrite(ctx, "edit_file", req.Path, func(content []byte) ([]byte, error) {
		return EditLines(content, req.StartLine, req.EndLine, req.NewContent)
	})
}

// PatchFile applies a unified diff for one file. Either every hunk applies
// and the file is replaced, or nothing is written.
func (e *Editor) PatchFile(ctx context.Context, req wire.PatchFileRequest) (wire.FileResult, error) {
	res, _, err := e.PatchFileReport(ctx, req)
	return res, err
}

// PatchFileReport is PatchFile that also says where each hunk applied, so
// a caller can tell the agent about hunks that matched at an offset.
func (e *Editor) PatchFileReport(ctx context.Context, req wire.PatchFileRequest) (wire.FileResult, []HunkResult, error) {
	if req.Patch == "" {
		return wire.FileResult{}, nil, wire.Errorf(wire.CodeBadRequest, "patch is required")
	}
	var hunks []HunkResult
	res, err := e.rewrite(ctx, "patch_file", req.Path, func(content []byte) ([]byte, error) {
		p, err := ApplyPatch(content, req.Patch)
		hunks = p.Hunks
		return p.Content, err
	})
	if err != nil {
		return wire.FileResult{}, nil, err
	}
	return res, hunks, nil
}

// rewrite reads an existing file, transforms it and writes it back
// atomically with its mode and owner. The file is not touched when
// change fails.
func (e *Editor) rewrite(ctx context.Context, tool, path string, change func([]byte) ([]byte, error)) (wire.FileResult, error) {
	if err := ctx.Err(); err != nil {
		return wire.FileResult{}, fmt.Errorf("%s: %w", tool, err)
	}
	name, err := cleanPath(path)
	if err != nil {
		return wire.FileResult{}, err
	}
	target, fi, err := resolve(e.Root, name)
	if err != nil {
		return wire.FileResult{}, fsError(tool, path, err)
	}
	content, err := readRegular(e.Root, target, path, e.limit())
	if err != nil {
		return wire.FileResult{}, err
	}
	out, err := change(content)
	if err != nil {
		return wire.FileResult{}, fmt.Errorf("%s %q: %w", tool, path, err)
	}
	if size := int64(len(out)); size > e.limit() {
		return wire.FileResult{}, tooLarge(path, size, e.limit())
	}
	spec := writeSpec{perm: keptMode(fi), owner: fi}
	if err := writeAtomic(ctx, e.Root, target, path, out, spec); err != nil {
		return wire.FileResult{}, err
	}
	return e.result(name, out), nil
}

func (e *Editor) result(name string, content []byte) wire.FileResult {
	return wire.FileResult{Path: filepath.ToSlash(name), Bytes: int64(len(content)), Lines: countLines(content)}
}
