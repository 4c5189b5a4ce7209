//go:build linux

package image

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
)

// The cache's tests use imagetest's registry and layers under short
// names.
type (
	testRegistry = imagetest.Registry
	testLayer    = imagetest.Layer
	imageSpec    = imagetest.ImageSpec
	ent          = imagetest.Entry
)

var (
	newRegistry = imagetest.NewRegistry
	gzLayer     = imagetest.GzLayer
	rawLayer    = imagetest.RawLayer
	file        = imagetest.File
	dir         = imagetest.Dir
	symlink     = imagetest.Symlink
	hardlink    = imagetest.Hardlink
	tarOf       = imagetest.Tar
	sha         = imagetest.Digest
)

func hostRootfs(t testing.TB) []byte { return imagetest.HostRootfs(t) }

// openCache opens a cache in a new directory that reaches r over plain
// HTTP.
func openCache(t testing.TB, r *testRegistry, opts Options) *Cache {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the image cache needs root")
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "cache")
	}
	if r != nil {
		opts.PlainHTTP = append(opts.PlainHTTP, r.Host)
	}
	c, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
