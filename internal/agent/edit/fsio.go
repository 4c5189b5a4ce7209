package edit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-mcp/berth/internal/wire"
)

// cleanPath checks a workspace-relative path and returns it cleaned in the
// OS form os.Root expects.
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", wire.Errorf(wire.CodeBadRequest, "path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", wire.Errorf(wire.CodeBadRequest, "path %q contains a NUL byte", p)
	}
	native := filepath.FromSlash(p)
	if filepath.IsAbs(native) || strings.HasPrefix(p, "/") {
		return "", wire.Errorf(wire.CodeForbidden, "path %q is absolute; paths are relative to the workspace", p)
	}
	c := filepath.Clean(native)
	if !filepath.IsLocal(c) {
		return "", wire.Errorf(wire.CodeForbidden, "path %q escapes the workspace", p)
	}
	if c == "." {
		return "", wire.Errorf(wire.CodeBadRequest, "path %q names the workspace itself, not a file", p)
	}
	return c, nil
}

// fsError turns an error from the os.Root into a coded error naming the
// path the caller asked for.
func fsError(op, path string, err error) error {
	switch {
	case isEscape(err):
		return wire.Errorf(wire.CodeForbidden, "%s %q: the path leads outside the workspace", op, path)
	case errors.Is(err, fs.ErrNotExist):
		return wire.Errorf(wire.CodeNotFound, "%s %q: no such file", op, path)
	case errors.Is(err, fs.ErrPermission):
		return wire.Errorf(wire.CodeForbidden, "%s %q: permission denied", op, path)
	case errors.Is(err, syscall.ENOTDIR):
		return wire.Errorf(wire.CodeBadRequest, "%s %q: a parent of the path is not a directory", op, path)
	case errors.Is(err, syscall.EISDIR):
		return wire.Errorf(wire.CodeBadRequest, "%s %q: is a directory", op, path)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return wire.Errorf(wire.CodeBadRequest, "%s %q: name too long", op, path)
	case errors.Is(err, syscall.ELOOP):
		return wire.Errorf(wire.CodeBadRequest, "%s %q: too many levels of symbolic links", op, path)
	}
	return fmt.Errorf("%s %q: %w", op, path, err)
}

// isEscape reports whether err is os.Root refusing a path that leads out
// of it. The os package keeps that error unexported, so it is recognised by
// its text.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// maxSymlinks bounds how many final-component symlinks resolve follows.
const maxSymlinks = 40

// resolve follows symlinks in the last component of name, so that a write
// replaces the file a link points at instead of the link itself. It
// returns the final name and its Lstat (or the Lstat error, with the name
// that did not exist).
func resolve(root *os.Root, name string) (string, fs.FileInfo, error) {
	for range maxSymlinks {
		fi, err := root.Lstat(name)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return name, fi, err
		}
		target, err := root.Readlink(name)
		if err != nil {
			return name, nil, err
		}
		next := filepath.Join(filepath.Dir(name), target)
		if filepath.IsAbs(target) || !filepath.IsLocal(next) {
			return name, nil, &fs.PathError{Op: "readlink", Path: name, Err: errors.New("path escapes from parent")}
		}
		name = next
	}
	return name, nil, &fs.PathError{Op: "lstat", Path: name, Err: syscall.ELOOP}
}

// readRegular reads a regular file of at most limit bytes.
func readRegular(root *os.Root, name, path string, limit int64) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, fsError("open", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsError("stat", path, err)
	}
	if fi.IsDir() {
		return nil, wire.Errorf(wire.CodeBadRequest, "%q is a directory, not a file", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, wire.Errorf(wire.CodeBadRequest, "%q is not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fsError("read", path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, int64(len(data)), limit)
	}
	return data, nil
}

func tooLarge(path string, size, limit int64) error {
	return wire.Errorf(wire.CodeTooLarge, "%q would be %d bytes, over the %d byte limit for edited files", path, size, limit)
}

// writeSpec says how writeAtomic creates the file.
type writeSpec struct {
	perm      fs.FileMode
	owner     fs.FileInfo // copy uid/gid from this file when set
	noReplace bool        // fail with CodeConflict if name exists
}

// writeAtomic writes data to a temporary file next to name and moves it
// into place, so that readers see the old or the new file, never a mix.
func writeAtomic(ctx context.Context, root *os.Root, name, path string, data []byte, spec writeSpec) (err error) {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	dir, base := filepath.Dir(name), filepath.Base(name)
	var f *os.File
	var tmp string
	for range 10 {
		var suffix [6]byte
		_, _ = rand.Read(suffix[:]) // never fails, see crypto/rand
		tmp = filepath.Join(dir, "."+base+".berth-"+hex.EncodeToString(suffix[:])+".tmp")
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fsError("create temporary file for", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fsError("write", path, err)
	}
	if spec.owner != nil {
		chownLike(f, spec.owner)
	}
	// Chmod after creating: OpenFile's mode is filtered by the umask, and
	// an edit must keep the file's mode exactly.
	if err = f.Chmod(spec.perm); err != nil {
		return fsError("chmod", path, err)
	}
	if err = f.Sync(); err != nil {
		return fsError("sync", path, err)
	}
	if err = f.Close(); err != nil {
		return fsError("close", path, err)
	}
	if err = ctx.Err(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if spec.noReplace {
		return placeNew(root, tmp, name, path)
	}
	if err = root.Rename(tmp, name); err != nil {
		return fsError("rename into place", path, err)
	}
	return nil
}

// placeNew moves tmp to name only if name does not exist. A hard link
// fails atomically when name exists; file systems without hard links fall
// back to a check and a rename.
func placeNew(root *os.Root, tmp, name, path string) error {
	err := root.Link(tmp, name)
	if err == nil {
		_ = root.Remove(tmp)
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		_ = root.Remove(tmp)
		return existsError(path)
	}
	if _, lerr := root.Lstat(name); lerr == nil {
		_ = root.Remove(tmp)
		return existsError(path)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return fsError("rename into place", path, err)
	}
	return nil
}

func existsError(path string) error {
	return wire.Errorf(wire.CodeConflict, "%q already exists; pass overwrite: true to replace it", path)
}

// keptMode is the part of a file's mode an edit preserves.
func keptMode(fi fs.FileInfo) fs.FileMode {
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
