//go:build linux

package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/runtime"
)

// An image on the local runtime is a workspace template: the directory
// <data-dir>/images/<tag>, copied into a new sandbox's workspace. base is
// the one every local runtime has: the template of that name when one was
// built, else an empty workspace.
const baseImage = "base"

// maxImagesShown bounds the images an unknown image's error lists.
const maxImagesShown = 20

var _ runtime.ImageChecker = (*Runtime)(nil)

// templateDir is where the template of tag would be, and false for a tag
// that cannot name one.
func (r *Runtime) templateDir(tag string) (string, bool) {
	if tag == "" || strings.Contains(tag, "..") || strings.ContainsRune(tag, '/') {
		return "", false
	}
	return filepath.Join(r.opts.DataDir, "images", tag), true
}

// CheckImage implements runtime.ImageChecker.
func (r *Runtime) CheckImage(ctx context.Context, tag string) error {
	if tag == baseImage {
		return nil
	}
	if dir, ok := r.templateDir(tag); ok {
		st, err := os.Stat(dir)
		if err == nil && st.IsDir() {
			return nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r.hideHostPaths("check image", "", err)
		}
	}
	known, err := r.images()
	if err != nil {
		return r.hideHostPaths("list images", "", err)
	}
	unknown := &runtime.UnknownImage{Tag: tag, Known: known}
	if len(known) > maxImagesShown {
		unknown.Known, unknown.More = known[:maxImagesShown], len(known)-maxImagesShown
	}
	return unknown
}

// images lists the images this runtime has, base first.
func (r *Runtime) images() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.DataDir, "images"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := r.templateDir(e.Name()); ok && e.IsDir() && e.Name() != baseImage {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return append([]string{baseImage}, names...), nil
}
