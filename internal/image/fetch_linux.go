//go:build linux

package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// unpack downloads layer l and unpacks it into the cache.
func (e *ensure) unpack(ctx context.Context, l v1.Descriptor, b *budget, onBytes func(int64)) error {
	return e.c.unpackInto(l, e.source, func(rootFd int) (unpacked, error) {
		var res unpacked
		err := e.download(ctx, l, onBytes, func(r io.Reader) error {
			var err error
			res, err = unpackLayer(ctx, r, rootFd, b)
			return err
		})
		return res, err
	})
}

// unpackInto makes layer l: fill unpacks it into an empty directory of
// tmp/ (rootFd), which, once complete and checked, is renamed into
// layers/ with its record naming source as the repository that has it.
// A layer that appeared meanwhile (the same content built twice) is kept
// as it was.
func (c *Cache) unpackInto(l v1.Descriptor, source string, fill func(rootFd int) (unpacked, error)) error {
	k, err := key(l.Digest.String())
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.dir, tmpDir), k+"-")
	if err != nil {
		return internal(err)
	}
	defer os.RemoveAll(tmp) // after the rename, nothing is there
	root := filepath.Join(tmp, rootDir)
	if err := os.Mkdir(root, 0o755); err != nil {
		return internal(err)
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return internal(err)
	}
	defer unix.Close(rootFd)
	res, err := fill(rootFd)
	if err != nil {
		return err
	}
	rec := &layerRecord{Format: format, Digest: l.Digest.String(), MediaType: string(l.MediaType),
		unpacked: res, Sources: []string{source}, Created: time.Now().UTC(), Boot: c.boot}
	if c.boot == "" {
		// No boot id to tell a host crash by: the files reach the disk
		// before the name does.
		if err := syncfs(tmp); err != nil {
			return err
		}
		rec.Synced = true
	}
	if err := writeJSON(filepath.Join(tmp, layerFile), rec, false); err != nil {
		return internal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.layers[rec.Digest] != nil {
		return nil
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, layersDir, k)); err != nil {
		return internal(err)
	}
	c.layers[rec.Digest] = rec
	if !rec.Synced {
		c.syncLater()
	}
	return nil
}

// bootID tells this boot of the host from the one before a crash.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func syncfs(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return internal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return internal(fmt.Errorf("sync: %w", err))
	}
	return nil
}
