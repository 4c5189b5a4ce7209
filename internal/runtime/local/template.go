//go:build linux

package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A build keeps its sandbox's workspace as the template
// <data-dir>/images/<name>. The workspace is a tree a hostile sandbox
// shaped, so it is copied out with the sandbox stopped, one directory
// descriptor at a time: every entry is looked at without following it,
// opened relative to its directory with O_NOFOLLOW and checked to be what
// was looked at. Symlinks are copied as symlinks and never followed, so a
// link to /etc/shadow or berth's key stays a link (which means in the
// next sandbox what it means there). Only regular files, directories and
// symlinks are kept; devices and FIFOs fail the build, sockets (left by
// processes that are gone) are skipped. The copy is bounded by the
// sandbox's disk limit, its entry count and its depth.

const (
	maxTemplateEntries = 1 << 20
	maxTemplateDepth   = 256
	maxSkippedShown    = 10
)

// templateRefused is a workspace berth will not keep as a template; it
// fails the build with its message.
type templateRefused struct{ msg string }

func (e *templateRefused) Error() string { return e.msg }

func refused(format string, args ...any) error { return &templateRefused{fmt.Sprintf(format, args...)} }

// treeCopy is one copy of a workspace.
type treeCopy struct {
	limit   int64 // bytes of file content
	bytes   int64
	entries int
	skipped []string
}

// copyWorkspace copies the tree at src into dst, which it creates. It
// returns the sockets it skipped.
func copyWorkspace(src, dst string, limit int64) ([]string, error) {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return nil, err
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	c := &treeCopy{limit: limit}
	if err := c.dir(sfd, dfd, ".", 0); err != nil {
		return nil, err
	}
	return c.skipped, unix.Fchmod(dfd, st.Mode&0o777)
}

// dir copies the entries of the directory src into dst.
func (c *treeCopy) dir(src, dst int, rel string, depth int) error {
	if depth > maxTemplateDepth {
		return refused("workspace: %s is nested more than %d directories deep", rel, maxTemplateDepth)
	}
	dup, err := unix.Dup(src)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), rel)
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, name := range names {
			if err := c.entry(src, dst, name, path.Join(rel, name), depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read workspace directory %s: %w", rel, err)
		}
	}
}

func (c *treeCopy) entry(src, dst int, name, rel string, depth int) error {
	if c.entries++; c.entries > maxTemplateEntries {
		return refused("workspace: more than %d files and directories", maxTemplateEntries)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("workspace %s: %w", rel, err)
	}
	perm := st.Mode & 0o777 // never setuid, setgid or sticky bits
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		s, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", rel, err)
		}
		defer unix.Close(s)
		if err := unix.Mkdirat(dst, name, 0o700); err != nil {
			return fmt.Errorf("template %s: %w", rel, err)
		}
		d, err := unix.Openat(dst, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("template %s: %w", rel, err)
		}
		defer unix.Close(d)
		if err := c.dir(s, d, rel, depth+1); err != nil {
			return err
		}
		// Set last: a read-only directory is still filled first.
		return unix.Fchmod(d, perm)
	case unix.S_IFREG:
		return c.file(src, dst, name, rel, perm, &st)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(src, name, buf)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", rel, err)
		}
		if err := unix.Symlinkat(string(buf[:n]), dst, name); err != nil {
			return fmt.Errorf("template %s: %w", rel, err)
		}
		return nil
	case unix.S_IFSOCK:
		if len(c.skipped) < maxSkippedShown {
			c.skipped = append(c.skipped, rel)
		}
		return nil
	default:
		return refused("workspace: %s is a %s; an image keeps only regular files, directories and symlinks: remove it in a last command", rel, kindOf(st.Mode))
	}
}

// file copies one regular file, after checking that what it opened is
// the file it looked at.
func (c *treeCopy) file(src, dst int, name, rel string, perm uint32, st *unix.Stat_t) error {
	in, err := unix.Openat(src, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", rel, err)
	}
	inF := os.NewFile(uintptr(in), rel)
	defer inF.Close()
	var got unix.Stat_t
	if err := unix.Fstat(in, &got); err != nil {
		return err
	}
	if got.Mode&unix.S_IFMT != unix.S_IFREG || got.Ino != st.Ino || got.Dev != st.Dev {
		return refused("workspace: %s changed while it was copied", rel)
	}
	if c.bytes+got.Size > c.limit {
		return refused("workspace: more than %d bytes of files (the sandbox's disk limit)", c.limit)
	}
	out, err := unix.Openat(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("template %s: %w", rel, err)
	}
	outF := os.NewFile(uintptr(out), rel)
	defer outF.Close()
	// The size was checked, but a file may still grow (with isolation
	// none the sandbox is not stopped by a namespace): stop at the limit.
	n, err := io.Copy(outF, io.LimitReader(inF, c.limit-c.bytes+1))
	c.bytes += n
	if err != nil {
		return fmt.Errorf("copy %s: %w", rel, err)
	}
	if c.bytes > c.limit {
		return refused("workspace: more than %d bytes of files (the sandbox's disk limit)", c.limit)
	}
	if err := outF.Chmod(os.FileMode(perm)); err != nil {
		return err
	}
	return outF.Close()
}

func kindOf(mode uint32) string {
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

// installTemplate makes the tree at staged the template name, in one
// rename: a template that exists is exchanged with it (and then removed),
// so a start sees the old template or the new one, never a mix. Starts
// that are copying a template hold tmplMu for reading.
func (r *Runtime) installTemplate(staged, name string) error {
	images := filepath.Join(r.opts.DataDir, "images")
	if err := os.Mkdir(images, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("images directory: %w", err)
	}
	dst := filepath.Join(images, name)
	r.tmplMu.Lock()
	err := unix.Renameat2(unix.AT_FDCWD, staged, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	exchanged := false
	if errors.Is(err, unix.EEXIST) {
		err = unix.Renameat2(unix.AT_FDCWD, staged, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
		exchanged = err == nil
	}
	r.tmplMu.Unlock()
	if err != nil {
		return fmt.Errorf("install template %s: %w", name, err)
	}
	if exchanged {
		// staged now holds the old template: berth's own tree, removed
		// without following its symlinks.
		if err := os.RemoveAll(staged); err != nil {
			r.log.Warn("remove the replaced template", "image", name, "path", staged, "err", err)
		}
	}
	return nil
}
