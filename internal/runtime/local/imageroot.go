//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// A sandbox's root filesystem is what its image_tag names:
//
//   - host (or base, or the name of a workspace template built by
//     build_images_from_yaml): the host system read-only (ReadOnlyPaths)
//     on a read-only tmpfs, as it always was; a template is copied into
//     the new workspace, and base is the template of that name when one
//     was built, else nothing;
//   - anything else is an OCI image reference (image.Normalize), pulled
//     into the image cache at the sandbox's first start: the image's
//     layers, each mounted read-only, nosuid, nodev and idmapped onto
//     the sandbox's uid block (its root owns the image's root's files),
//     under a writable upper directory on the sandbox's own volume
//     (overlayfs), so that what it installs persists across its agent's
//     restarts and counts against its disk limit.
//
// The overlay is made by berth, as a detached mount (fsopen, fsmount)
// over detached idmapped clones of the cached layers, and handed to the
// sandbox's init on a socket: it is in no directory of the host, its
// lower layers are not reachable as such from inside, and it goes with
// the sandbox's mount namespace. The digest the sandbox started from is
// kept in <server dir>/image.json, so that starting it again (after its
// agent died, or after a host reboot) mounts the same image under the
// same upper whatever its tag names by then.

// hostImage names the host system read-only, with an empty workspace.
const hostImage = "host"

// imageFile records a sandbox's image in its server directory.
const imageFile = "image.json"

type imageRecord struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// Under a volume, the image root's directories: berth's (root, 0700),
// holding the sandbox's upper (owned by its root) and overlayfs's work
// directory.
const (
	rootSubdir  = "root"
	upperSubdir = "upper"
	workSubdir  = "work"
)

// imageRef says what tag names: "" for the host system (host, base, a
// template, or no tag at all), else the normalized reference of an OCI
// image. A bare name this runtime built an image of (base included) is
// that image's latest build, berth.local/NAME:latest, before a template or
// the Docker Hub image of that name. A tag that is none of these is an
// *runtime.UnknownImage.
func (r *Runtime) imageRef(tag string) (string, error) {
	if tag == "" || tag == hostImage {
		return "", nil
	}
	if _, bare := r.templateDir(tag); bare && r.cache != nil {
		if ref, err := image.LocalRef(tag, "latest"); err == nil && r.cache.HasRef(ref) {
			return ref, nil
		}
	}
	if tag == baseImage {
		return "", nil
	}
	if dir, ok := r.templateDir(tag); ok {
		st, err := os.Stat(dir)
		if err == nil && st.IsDir() {
			return "", nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	ref, err := image.Normalize(tag)
	if err != nil {
		return "", &runtime.UnknownImage{Tag: tag, Reason: fmt.Sprintf("%q is neither host, base nor a template of this runtime, nor an image reference: %s",
			tag, wire.DetailOf(err).Message)}
	}
	return ref, nil
}

// localImageMissing is the answer for a local image (berth.local) the
// cache does not have.
func localImageMissing(ref string) string {
	return fmt.Sprintf("image %s is not in this berth's image cache: %s names images built here by build_images_from_yaml, "+
		"kept while it is the latest build of its name or a sandbox uses it; build it again", ref, image.LocalDomain)
}

// ensureImage makes the image of a sandbox that starts from an OCI image
// ready in the cache, pinned for the sandbox, and returns it; nil for a
// sandbox of the host system. A sandbox started before keeps its image:
// the digest it recorded is looked up in the cache, and pulled again by
// digest when a host crash lost it.
func (r *Runtime) ensureImage(ctx context.Context, spec runtime.Spec) (*image.Image, error) {
	ref, err := r.imageRef(spec.ImageTag)
	if err != nil || ref == "" {
		return nil, err
	}
	if r.cache == nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "image %s: sandboxes start from OCI images only with full isolation (this berth runs with --isolation none): use host or a template", ref)
	}
	if !r.agentStatic {
		return nil, fmt.Errorf("image %s: the berth-agent binary is dynamically linked, and would not run in an image with other libraries: build it static (CGO_ENABLED=0, as make build does)", ref)
	}
	id := spec.ServerID
	pull := image.Pull{Credentials: r.opts.RegistryCredentials, Holder: id, Progress: pullProgress(ref, spec.Progress)}
	if rec, err := r.readImageRecord(id); err == nil && rec.Ref == ref {
		img, err := r.cache.Lookup(rec.Digest)
		if err == nil {
			if err := r.cache.Pin(id, img.Digest); err != nil {
				return nil, err
			}
			return &img, nil
		}
		at, err := image.WithDigest(rec.Ref, rec.Digest)
		if err != nil {
			return nil, err
		}
		r.log.Info("a sandbox's image is no longer cached: pulling it again by digest", "server_id", id, "image", at)
		img, err = r.cache.Ensure(ctx, at, pull)
		if err != nil {
			return nil, err
		}
		return &img, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var img image.Image
	if image.IsLocal(ref) {
		// Built here: no registry has it.
		if img, err = r.cache.LookupRef(ref, id); err != nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "%s", localImageMissing(ref))
		}
	} else if img, err = r.cache.Ensure(ctx, ref, pull); err != nil {
		return nil, err
	}
	for _, n := range img.Notes {
		r.log.Info("image unpacked with changes", "image", ref, "note", n)
	}
	b, _ := json.Marshal(imageRecord{Ref: ref, Digest: img.Digest})
	tmp := filepath.Join(r.dir(id), imageFile+".new")
	if err := writeFileNoFollow(tmp, b); err != nil {
		return nil, fmt.Errorf("record the sandbox's image: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir(id), imageFile)); err != nil {
		return nil, fmt.Errorf("record the sandbox's image: %w", err)
	}
	return &img, nil
}

func (r *Runtime) readImageRecord(id string) (imageRecord, error) {
	b, err := readFileNoFollow(filepath.Join(r.dir(id), imageFile), 64<<10)
	if err != nil {
		return imageRecord{}, err
	}
	var rec imageRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return imageRecord{}, fmt.Errorf("image record of %s: %w", id, err)
	}
	return rec, nil
}

// pullProgress passes the cache's progress on as the start's.
func pullProgress(ref string, fn func(runtime.Progress)) func(image.Progress) {
	if fn == nil {
		return nil
	}
	return func(p image.Progress) {
		if p.BytesTotal == 0 {
			// All cached: nothing to watch, and no write for it.
			return
		}
		fn(runtime.Progress{Step: "pulling " + ref, BytesDone: p.BytesDone, BytesTotal: p.BytesTotal,
			LayersDone: p.LayersDone, LayersTotal: p.LayersTotal})
	}
}

// sendRoot sends the root filesystem's mount to the init on sock.
func sendRoot(sock *os.File, root *os.File) error {
	err := unix.Sendmsg(int(sock.Fd()), []byte{0}, unix.UnixRights(int(root.Fd())), nil, 0)
	if err != nil {
		return fmt.Errorf("send the image's root filesystem: %w", err)
	}
	return nil
}

// imageEnv is the environment of an image's sandbox: berth's base, the
// image's Env over it (its PATH, say), the caller's over both.
func imageEnv(img *image.Image, extra map[string]string) map[string]string {
	env := map[string]string{}
	if img != nil {
		for _, kv := range img.Config.Env {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				env[k] = v
			}
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// commandDefaults are the agent's arguments for an image's WorkingDir
// (the default cwd of commands) and User (their default user).
func commandDefaults(img *image.Image) []string {
	if img == nil {
		return nil
	}
	var args []string
	if wd := img.Config.WorkingDir; wd != "" && filepath.IsAbs(wd) {
		args = append(args, "--command-dir", filepath.Clean(wd))
	}
	if u := img.Config.User; u != "" {
		args = append(args, "--command-user", u)
	}
	return args
}

// releaseImage drops a deleted sandbox's pin on its image.
func (r *Runtime) releaseImage(id string) error {
	if r.cache == nil {
		return nil
	}
	if err := r.cache.Release(id); err != nil {
		return fmt.Errorf("release the sandbox's image: %w", err)
	}
	return nil
}

// ListImages implements runtime.ImageLister.
func (r *Runtime) ListImages(ctx context.Context) (runtime.Images, error) {
	named, err := r.images()
	if err != nil {
		return runtime.Images{}, r.hideHostPaths("list images", "", err)
	}
	out := runtime.Images{Named: named, Cached: []runtime.CachedImage{}}
	if r.cache == nil {
		return out, nil
	}
	out.CacheBytes, out.CacheLimit = r.cache.Size(), r.cache.Limit()
	for _, e := range r.cache.List() {
		// A name's latest build is held by the name, not a sandbox.
		sandboxes := 0
		for _, h := range e.HeldBy {
			if validID.MatchString(h) {
				sandboxes++
			}
		}
		out.Cached = append(out.Cached, runtime.CachedImage{Digest: e.Digest, Refs: e.Refs, Size: e.Size, Sandboxes: sandboxes,
			Pulled: e.Pulled, LastUsed: e.LastUsed})
	}
	return out, nil
}
