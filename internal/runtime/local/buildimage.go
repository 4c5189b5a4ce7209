//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// A build from an OCI image makes an OCI image: its base's layers and one
// more, made of what the build's sandbox wrote (image.WriteDiff says how
// that hostile tree is read):
//   - its overlay's upper directory: what it changed of its root
//     filesystem, whiteouts and opaque directories included, but for the
//     directories berth mounts over (/dev, /proc, /run, /tmp, /workspace),
//     which hold nothing of an image;
//   - its workspace, as the image's /workspace, replacing the base's,
//     where Kaniko's images have it too; a sandbox started from the image
//     starts with it in its workspace (sandbox.Spec.SeedWorkspace).
//
// Ownership is mapped back from the sandbox's id block to the image's ids.
// The build's environment is not the image's: its values may be secrets,
// and a server gets the env of its own start (as with Kaniko, where each
// RUN sources it).
//
// The image is put in the image cache under berth.local/NAME:<build id>
// and berth.local/NAME:latest, pinned by the holder nameHolder(NAME) so
// that the latest build of a name stays while no sandbox uses it, and,
// when the operator names a registry (--image-registry), pushed there
// first as REGISTRY/NAME:<build id> and :latest, the reference the build
// answers. A build of NAME replaces a workspace template of that name and
// a template build of NAME drops the name's image, so a name means one
// thing: its latest build.

// upperSkip are the directories of a sandbox's root berth mounts over.
var upperSkip = []string{"dev", "proc", "run", "tmp", wsSubdir}

// nameHolder is the image cache holder that pins the latest build of name:
// not a sandbox id (those have no '.'), so reconcilePins leaves it.
func nameHolder(name string) string { return "image." + name }

// keepImage makes the stopped build sandbox's changes a new image.
func (run *build) keepImage(ctx context.Context) error {
	r, b := run.r, run.b
	run.step("making image " + b.Name + " of the build's changes")
	staged, err := run.stage()
	if err != nil {
		return err
	}
	if err := mkdirPrivate(staged, 0o700); err != nil {
		return fmt.Errorf("build %s: %w", b.ID, err)
	}
	rec, err := r.readImageRecord(b.ID)
	if err != nil {
		return fmt.Errorf("build %s: the base image of its sandbox: %w", b.ID, err)
	}
	claim, err := readSlotFile(r.dir(b.ID))
	if err != nil {
		return fmt.Errorf("build %s: the sandbox's ids: %w", b.ID, err)
	}
	vol := filepath.Join(r.dir(b.ID), volumeDir)
	upper, err := openTreeDir(vol, rootSubdir, upperSubdir)
	if err != nil {
		return fmt.Errorf("build %s: its root's changes: %w", b.ID, err)
	}
	defer upper.Close()
	ws, err := openTreeDir(vol, wsSubdir)
	if err != nil {
		return fmt.Errorf("build %s: its workspace: %w", b.ID, err)
	}
	defer ws.Close()

	// The layer's blob, then its unpacked copy in the cache, are written
	// into the data directory: their sizes are taken from the space
	// above the reserve first (the blob's at most about what the volume
	// holds; the copy's what the files declare).
	release, err := r.space.take(r.workspaceUse(b.ID), "the layer of image "+b.Name)
	if err != nil {
		return &runtime.BuildFailed{Reason: err.Error()}
	}
	defer release()
	maxEntries, maxBytes := r.cache.ImageLimits()
	lim := image.DiffLimits{IDBase: claim.uid(r.confine.uids), MaxEntries: maxEntries, MaxBytes: min(maxBytes, r.opts.Limits.DiskBytes)}
	trees := []image.Tree{
		{Dir: upper, Upper: true, Skip: upperSkip},
		{Dir: ws, At: wsSubdir, Opaque: true},
	}
	lf, res, err := image.WriteLayerFile(ctx, filepath.Join(staged, "layer.tar.gz"), trees, lim)
	if err != nil {
		var refused *image.DiffRefused
		if errors.As(err, &refused) {
			return &runtime.BuildFailed{Reason: "the build's files cannot be an image: " + refused.Error()}
		}
		return fmt.Errorf("build %s: write its layer: %w", b.ID, err)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(run.log, "image %s: %s\n", b.Name, n)
	}
	releaseFiles, err := r.space.take(res.Bytes, "the files of image "+b.Name)
	if err != nil {
		return &runtime.BuildFailed{Reason: err.Error()}
	}
	defer releaseFiles()
	if r.opts.ImageRegistry != "" {
		run.step("pushing image " + b.Name + " to " + r.opts.ImageRegistry)
	}
	built, err := r.cache.AddBuild(ctx, image.Build{Base: rec.Ref, BaseDigest: rec.Digest, Layer: lf, Name: b.Name, Tag: b.ID,
		Registry: r.opts.ImageRegistry, Credentials: r.opts.RegistryCredentials, Holder: nameHolder(b.Name),
		CreatedBy: "berth build " + b.ID})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d := wire.DetailOf(err); d.Code == wire.CodeBadRequest {
			return &runtime.BuildFailed{Reason: d.Message}
		}
		return fmt.Errorf("build %s: keep image %s: %w", b.ID, b.Name, err)
	}
	fmt.Fprintf(run.log, "image %s: %s (%s)\n", b.Name, built.Ref, built.Image.Digest)
	run.image = built.Ref
	return r.removeTemplate(b.Name)
}

// openTreeDir opens the directory at the path elems under dir, each step
// with O_NOFOLLOW, for reading.
func openTreeDir(dir string, elems ...string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, e := range elems {
		next, err := unix.Openat(fd, e, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e, err)
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(append([]string{dir}, elems...)...)), nil
}

// removeTemplate removes the workspace template name, if there is one: an
// image build of that name replaced it.
func (r *Runtime) removeTemplate(name string) error {
	dir, ok := r.templateDir(name)
	if !ok {
		return nil
	}
	trash := filepath.Join(r.opts.DataDir, "image-builds", "."+name+".old")
	if err := os.RemoveAll(trash); err != nil {
		return err
	}
	r.tmplMu.Lock()
	err := os.Rename(dir, trash)
	r.tmplMu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the template %s the image replaces: %w", name, err)
	}
	return os.RemoveAll(trash)
}

// dropBuiltName makes name no image's any more: a template build of that
// name replaced its image, which stays cached under its build's tag while
// a sandbox uses it.
func (r *Runtime) dropBuiltName(name string) error {
	if r.cache == nil {
		return nil
	}
	ref, err := image.LocalRef(name, "latest")
	if err != nil {
		return nil // no image can have that name
	}
	if err := r.cache.Untag(ref); err != nil {
		return err
	}
	return r.cache.Release(nameHolder(name))
}
