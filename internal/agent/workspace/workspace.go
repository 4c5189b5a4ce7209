// Package workspace owns the sandbox's file operations: listing, reading,
// atomic writing, making and removing directories, and tar archives in both
// directions. Every path is confined to one workspace directory through
// os.Root, so neither "..", absolute paths nor symlinks can reach files
// outside it unless the agent was started with --allow-outside-workspace.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// Default limits used when the Options leave them at zero.
const (
	DefaultMaxArchiveBytes int64 = 1 << 30
	DefaultMaxWriteBytes   int64 = 64 << 20
)

// Options configures a Workspace.
type Options struct {
	// Root is the workspace directory; it must exist.
	Root string
	// AllowOutside (--allow-outside-workspace) lets absolute paths anywhere
	// and ".." beyond the root through; operations then use plain os calls.
	AllowOutside bool
	// MaxArchiveBytes limits the uncompressed size of an uploaded tar
	// archive (0 = 1 GiB).
	MaxArchiveBytes int64
	// MaxWriteBytes limits the content of one Write (0 = 64 MiB).
	MaxWriteBytes int64
}

// Workspace performs file operations confined to one directory. It is safe
// for concurrent use.
type Workspace struct {
	root     *os.Root
	rootPath string // absolute, symlinks resolved
	given    string // absolute as configured, which may differ through symlinks
	outside  bool
	maxArch  int64
	maxWrite int64
	fs       fsys

	// beforeRename, when set, runs between writing a temporary file and
	// renaming it over the target; tests use it to make the rename fail.
	beforeRename func(name string) error
}

// Open opens the workspace directory described by opts.
func Open(opts Options) (*Workspace, error) {
	if opts.Root == "" {
		return nil, errors.New("open workspace: no root directory given")
	}
	if opts.MaxArchiveBytes < 0 || opts.MaxWriteBytes < 0 {
		return nil, fmt.Errorf("open workspace: negative size limit (archive %d, write %d)", opts.MaxArchiveBytes, opts.MaxWriteBytes)
	}
	given, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", opts.Root, err)
	}
	real, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", opts.Root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", opts.Root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open workspace %s: not a directory", opts.Root)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", opts.Root, err)
	}
	w := &Workspace{
		root:     root,
		rootPath: real,
		given:    given,
		outside:  opts.AllowOutside,
		maxArch:  opts.MaxArchiveBytes,
		maxWrite: opts.MaxWriteBytes,
		fs:       root,
	}
	if w.maxArch == 0 {
		w.maxArch = DefaultMaxArchiveBytes
	}
	if w.maxWrite == 0 {
		w.maxWrite = DefaultMaxWriteBytes
	}
	if w.outside {
		w.fs = osFS{}
	}
	return w, nil
}

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Root returns the absolute workspace directory with symlinks resolved.
func (w *Workspace) Root() string { return w.rootPath }

// OSRoot returns the *os.Root for callers (the edit tools) that need to
// open files confined to the workspace. It stays confined even when
// AllowOutside is set.
func (w *Workspace) OSRoot() *os.Root { return w.root }

// AllowOutside reports whether paths outside the workspace are allowed.
func (w *Workspace) AllowOutside() bool { return w.outside }

// Rel turns a user path into a clean workspace-relative path ("." for the
// root itself), or a wire.CodeForbidden error when it escapes. With
// AllowOutside a path outside the workspace is returned as a clean
// absolute path instead of an error.
func (w *Workspace) Rel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", wire.Errorf(wire.CodeBadRequest, "path %q contains a NUL byte", p)
	}
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		for _, base := range []string{w.rootPath, w.given} {
			if rel, ok := within(base, c); ok {
				return rel, nil
			}
		}
		if w.outside {
			return c, nil
		}
		// Errors never name the workspace root: with no isolation it is
		// where berth keeps the server on the host.
		return "", wire.Errorf(wire.CodeForbidden, "path %s is outside the workspace; paths are relative to it", p)
	}
	c := filepath.Clean(p)
	if escapes(c) {
		if w.outside {
			return filepath.Join(w.rootPath, c), nil
		}
		return "", wire.Errorf(wire.CodeForbidden, "path %s escapes the workspace", p)
	}
	return c, nil
}

// target is a resolved user path: name is what the fsys takes (relative to
// the root when confined, absolute otherwise) and disp is what results and
// messages show.
type target struct {
	name string
	disp string
}

// resolve maps a user path onto the fsys in use.
func (w *Workspace) resolve(p string) (target, error) {
	rel, err := w.Rel(p)
	if err != nil {
		return target{}, err
	}
	if !w.outside {
		return target{name: rel, disp: rel}, nil
	}
	if filepath.IsAbs(rel) {
		return target{name: rel, disp: rel}, nil
	}
	return target{name: filepath.Join(w.rootPath, rel), disp: rel}, nil
}

// isRootOrAbove reports whether removing t would remove the workspace root.
func (w *Workspace) isRootOrAbove(t target) bool {
	if !w.outside {
		return t.name == "."
	}
	_, ok := within(t.name, w.rootPath)
	return ok
}

// within returns p relative to base when p is base or lies below it.
func within(base, p string) (string, bool) {
	if p == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if strings.HasPrefix(p, prefix) {
		return p[len(prefix):], true
	}
	return "", false
}

// escapes reports whether a clean relative path climbs above its base.
func escapes(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator))
}

// resolveLinks follows symlinks at the final element of t so that a write
// lands on the link's target instead of replacing the link. A link whose
// target lies outside the workspace is refused when confined.
func (w *Workspace) resolveLinks(t target) (target, error) {
	for range 40 {
		fi, err := w.fs.Lstat(t.name)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return t, nil
		}
		link, err := w.fs.Readlink(t.name)
		if err != nil {
			return t, fsError("readlink", t.disp, err)
		}
		abs := link
		if !filepath.IsAbs(link) {
			parent := filepath.Dir(t.name)
			if !w.outside {
				parent = filepath.Join(w.rootPath, parent)
			}
			realParent, err := filepath.EvalSymlinks(parent)
			if err != nil {
				return t, fsError("resolve", t.disp, err)
			}
			abs = filepath.Join(realParent, link)
		}
		if w.outside {
			t.name = abs
			continue
		}
		rel, ok := within(w.rootPath, abs)
		if !ok {
			return t, wire.Errorf(wire.CodeForbidden, "%s is a symlink to %s, outside the workspace", t.disp, link)
		}
		t.name = rel
	}
	return t, wire.Errorf(wire.CodeBadRequest, "%s: too many levels of symbolic links", t.disp)
}
