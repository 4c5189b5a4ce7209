//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
)

// A workspace template is the directory <data-dir>/images/<tag>, copied
// into a new sandbox's workspace over the host system (see imageroot.go
// for what else an image_tag names). base is the one every local runtime
// has: the template of that name when one was built, else an empty
// workspace, like host.
const baseImage = "base"

// maxImagesShown bounds the images an unknown image's error lists.
const maxImagesShown = 20

var (
	_ runtime.ImageChecker = (*Runtime)(nil)
	_ runtime.ImageLister  = (*Runtime)(nil)
)

// templateDir is where the template of tag would be, and false for a tag
// that cannot name one.
func (r *Runtime) templateDir(tag string) (string, bool) {
	if tag == "" || strings.Contains(tag, "..") || strings.ContainsRune(tag, '/') || strings.ContainsRune(tag, ':') {
		return "", false
	}
	return filepath.Join(r.opts.DataDir, "images", tag), true
}

// CheckImage implements runtime.ImageChecker: host, base and templates
// by their names, and image references (in their normalized form) when
// the runtime can start them. Whether the registry has the image is
// found out at the start.
func (r *Runtime) CheckImage(ctx context.Context, tag string) (string, error) {
	ref, err := r.imageRef(tag)
	var unknown *runtime.UnknownImage
	switch {
	case errors.As(err, &unknown):
	case err != nil:
		return "", r.hideHostPaths("check image", "", err)
	case ref == "":
		return tag, nil
	case image.IsLocal(ref) && (r.cache == nil || !r.cache.HasRef(ref)):
		unknown = &runtime.UnknownImage{Tag: tag, Reason: localImageMissing(ref)}
	case r.cache == nil:
		unknown = &runtime.UnknownImage{Tag: tag, Reason: fmt.Sprintf("image %s: sandboxes start from OCI images only with full isolation (this berth runs with --isolation none)", ref)}
	default:
		return ref, nil
	}
	known, err := r.images()
	if err != nil {
		return "", r.hideHostPaths("list images", "", err)
	}
	unknown.Known = known
	if len(known) > maxImagesShown {
		unknown.Known, unknown.More = known[:maxImagesShown], len(known)-maxImagesShown
	}
	return "", unknown
}

// images lists the images this runtime has by name: host, base, then
// the templates and the names it built images of.
func (r *Runtime) images() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.DataDir, "images"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := r.templateDir(e.Name()); ok && e.IsDir() && e.Name() != baseImage && e.Name() != hostImage {
			names = append(names, e.Name())
		}
	}
	if r.cache != nil {
		names = append(names, r.cache.LocalNames()...)
	}
	slices.Sort(names)
	names = slices.DeleteFunc(slices.Compact(names), func(n string) bool { return n == baseImage || n == hostImage })
	return append([]string{hostImage, baseImage}, names...), nil
}
