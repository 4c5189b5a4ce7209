//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-mcp/berth/internal/runtime"
)

// upstreamsSubdir holds the MCP upstream declarations of an unconfined
// sandbox (--isolation none) on the host, inside its server directory,
// which only berth can reach: no sandbox can plant a symlink or swap a
// directory anywhere on the path berth writes. A confined sandbox gets
// them on a tmpfs of their own instead (see upstreamsMount), read-only at
// runtime.UpstreamsDir, as files of an unmapped owner it cannot change.
const upstreamsSubdir = "upstreams"

func (r *Runtime) upstreamsPath(id string) string {
	return filepath.Join(r.dir(id), upstreamsSubdir)
}

// writeUpstreams makes the sandbox's upstreams directory hold exactly
// the declarations of ups, and returns its path. It runs before the agent
// starts, so the agent never reads a file half written.
func (r *Runtime) writeUpstreams(id string, ups []runtime.Upstream) (string, error) {
	files, err := runtime.UpstreamFiles(ups)
	if err != nil {
		return "", err
	}
	dir := r.upstreamsPath(id)
	// Readable by every user of the sandbox: the agent may run as any.
	if err := mkdirPrivate(dir, 0o755); err != nil {
		return "", fmt.Errorf("upstreams dir: %w", err)
	}
	// Through a Root even so: no name resolves outside the directory.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("upstreams dir: %w", err)
	}
	defer root.Close()
	old, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("upstreams dir: %w", err)
	}
	for _, e := range old {
		if _, keep := files[e.Name()]; !keep {
			if err := root.RemoveAll(e.Name()); err != nil {
				return "", fmt.Errorf("remove old upstream %s: %w", e.Name(), err)
			}
		}
	}
	for name, data := range files {
		if err := writeRootFile(root, name, data, 0o644); err != nil {
			return "", fmt.Errorf("write upstream %s: %w", name, err)
		}
	}
	return dir, nil
}

// writeRootFile writes name in root with exactly mode, whatever the
// umask.
func writeRootFile(root *os.Root, name string, data []byte, mode os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
