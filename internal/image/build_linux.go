//go:build linux

package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

// An image a build made is its base image, as the cache has it, with one
// layer more, made by WriteLayerFile from what the build's sandbox wrote.
// AddBuild composes it with go-containerregistry (the base's manifest and
// config, the new layer appended, its diff ID and a history entry added
// to the config), pushes it when the operator named a registry, and puts
// it in the cache: the new layer is unpacked from its blob by the same
// unpacker every pulled layer goes through, so the cache holds exactly
// what a pull of the pushed image would give.

// LayerFile is a layer written to a file: the gzip of its tar.
type LayerFile struct {
	Path   string
	Digest string // of the file, the layer's blob
	DiffID string // of the tar
	Size   int64  // of the file
}

// WriteLayerFile writes the trees as one gzip-compressed layer to the new
// file path.
func WriteLayerFile(ctx context.Context, path string, trees []Tree, lim DiffLimits) (LayerFile, DiffResult, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return LayerFile{}, DiffResult{}, err
	}
	defer f.Close()
	blob := &hashCounter{h: sha256.New()}
	bw := bufio.NewWriterSize(io.MultiWriter(f, blob), 256<<10)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if err != nil {
		return LayerFile{}, DiffResult{}, err
	}
	diff := &hashCounter{h: sha256.New()}
	res, err := WriteDiff(ctx, io.MultiWriter(zw, diff), trees, lim)
	if err != nil {
		return LayerFile{}, res, err
	}
	if err := zw.Close(); err != nil {
		return LayerFile{}, res, err
	}
	if err := bw.Flush(); err != nil {
		return LayerFile{}, res, err
	}
	if err := f.Close(); err != nil {
		return LayerFile{}, res, err
	}
	return LayerFile{Path: path, Digest: blob.digest(), DiffID: diff.digest(), Size: blob.n}, res, nil
}

type hashCounter struct {
	h hash.Hash
	n int64
}

func (w *hashCounter) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.n += int64(len(p))
	return len(p), nil
}

func (w *hashCounter) digest() string { return "sha256:" + hex.EncodeToString(w.h.Sum(nil)) }

// Build is an image a build made, for AddBuild.
type Build struct {
	// Base is the reference the build's sandbox started from
	// (normalized) and BaseDigest the manifest digest it had.
	Base, BaseDigest string
	// Layer is the build's layer, from WriteLayerFile.
	Layer LayerFile
	// Name and Tag name the image: LocalDomain/Name:Tag and
	// LocalDomain/Name:latest in the cache (taken from any image that had
	// them). When Registry, a repository prefix such as
	// registry.example.com/berth, is set, the image is first pushed there
	// as Registry/Name:Tag and Registry/Name:latest, which it is named by
	// too.
	Name, Tag string
	Registry  string
	// Credentials are presented to the base's registry and to Registry.
	Credentials Credentials
	// Holder, when set, pins the image.
	Holder string
	// CreatedBy is the history entry of the new layer.
	CreatedBy string
}

// Built is what AddBuild made.
type Built struct {
	Image Image
	// Ref is the reference to start it by: the registry's when it was
	// pushed, else the local one, both tagged Build.Tag.
	Ref string
	// Refs are all its names.
	Refs []string
}

// AddBuild composes the image b describes, pushes it when b names a
// registry, and adds it to the cache. A failed push adds nothing.
func (c *Cache) AddBuild(ctx context.Context, b Build) (Built, error) {
	local, err := LocalRef(b.Name, b.Tag)
	if err != nil {
		return Built{}, err
	}
	latest, err := LocalRef(b.Name, "latest")
	if err != nil {
		return Built{}, err
	}
	refs := []string{local, latest}
	out := Built{Ref: local}
	sources := []string{LocalDomain + "/" + b.Name}
	var pushTo []string
	if b.Registry != "" {
		repo := strings.TrimSuffix(b.Registry, "/") + "/" + b.Name
		for _, tag := range []string{b.Tag, "latest"} {
			r, err := Normalize(repo + ":" + tag)
			if err != nil {
				return Built{}, fmt.Errorf("the registry images are pushed to (%s): %w", b.Registry, err)
			}
			pushTo = append(pushTo, r)
		}
		out.Ref = pushTo[0]
		named, _ := parse(pushTo[0])
		sources = append(sources, reference.TrimNamed(named).String())
		refs = append(refs, pushTo...)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(b.Credentials),
		remote.WithTransport(c.transport), remote.WithUserAgent("berth/" + version.Version)}
	base, err := c.buildBase(b, opts)
	if err != nil {
		return Built{}, err
	}
	mt, err := base.MediaType()
	if err != nil {
		return Built{}, fmt.Errorf("base image %s: %w", b.Base, err)
	}
	layerType := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	now := time.Now().UTC()
	layer := &fileLayer{f: b.Layer, mt: layerType}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, MediaType: layerType,
		History: v1.History{Created: v1.Time{Time: now}, CreatedBy: b.CreatedBy, Comment: "berth build"}})
	if err != nil {
		return Built{}, err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: now}); err != nil {
		return Built{}, err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return Built{}, fmt.Errorf("compose the image: %w", err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return Built{}, fmt.Errorf("compose the image: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	for i, r := range pushTo {
		if err := c.push(ctx, r, img, i == 0, opts); err != nil {
			return Built{}, err
		}
	}
	out.Image, err = c.addBuilt(ctx, b, digest.String(), rawManifest, rawConfig, refs, sources)
	out.Refs = refs
	return out, err
}

// buildBase is the base image of b: its manifest and config, and its
// layers where a push needs them. A local base is the cache's own; any
// other comes from its registry, by digest.
func (c *Cache) buildBase(b Build, opts []remote.Option) (v1.Image, error) {
	named, err := parse(b.Base)
	if err != nil {
		return nil, err
	}
	if reference.Domain(named) != LocalDomain {
		at, err := WithDigest(b.Base, b.BaseDigest)
		if err != nil {
			return nil, err
		}
		atNamed, _ := parse(at)
		ref, err := remoteRef(atNamed, c.opts.PlainHTTP)
		if err != nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "%v", err)
		}
		img, err := remote.Image(ref, append(opts, remote.WithPlatform(c.platform))...)
		if err != nil {
			return nil, (&ensure{named: named, ref: ref, pull: Pull{Credentials: b.Credentials}}).registryError(err)
		}
		return img, nil
	}
	if b.Registry != "" {
		return nil, wire.Errorf(wire.CodeBadRequest, "base %s was built here without a registry to push to, so its layers are in no registry: build it again now that images are pushed to %s, and build on that",
			b.Base, b.Registry)
	}
	c.mu.Lock()
	rec := c.images[b.BaseDigest]
	var lb localBase
	if rec != nil {
		lb = localBase{manifest: rec.Manifest, config: rec.ConfigFile}
	}
	c.mu.Unlock()
	if rec == nil || lb.manifest == nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "base %s (%s) is no longer in the image cache: build it again", b.Base, b.BaseDigest)
	}
	return partial.CompressedToImage(lb)
}

// localBase is a local image as the base of a build: its manifest and
// config; its layers are only unpacked, so it cannot be pushed.
type localBase struct{ manifest, config []byte }

func (l localBase) RawManifest() ([]byte, error)   { return l.manifest, nil }
func (l localBase) RawConfigFile() ([]byte, error) { return l.config, nil }
func (l localBase) MediaType() (types.MediaType, error) {
	var m struct {
		MediaType types.MediaType `json:"mediaType"`
	}
	if err := json.Unmarshal(l.manifest, &m); err != nil {
		return "", err
	}
	return m.MediaType, nil
}

func (l localBase) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	return nil, fmt.Errorf("layer %s of a local image is kept unpacked only", h)
}

// push writes img to the registry as ref (the first push uploads what
// the registry lacks; the next ones only tag).
func (c *Cache) push(ctx context.Context, ref string, img v1.Image, first bool, opts []remote.Option) error {
	named, err := parse(ref)
	if err != nil {
		return err
	}
	r, err := remoteRef(named, c.opts.PlainHTTP)
	if err != nil {
		return wire.Errorf(wire.CodeBadRequest, "%v", err)
	}
	if tag, ok := r.(name.Tag); ok && !first {
		err = remote.Tag(tag, img, opts...)
	} else {
		err = remote.Write(r, img, opts...)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if refusal(err) {
			return wire.Errorf(wire.CodeBadRequest, "push image %s: the registry refused it (push credentials come from --registry-auth-file): %v", named, err)
		}
		return wire.Errorf(wire.CodeBadGateway, "push image %s: %v", named, err)
	}
	return nil
}

// addBuilt puts the composed image in the cache: its base's layers, which
// the cache has (the build's sandbox pinned them), and the new layer,
// unpacked from its blob.
func (c *Cache) addBuilt(ctx context.Context, b Build, digest string, rawManifest, rawConfig []byte, refs, sources []string) (Image, error) {
	var mf v1.Manifest
	if err := json.Unmarshal(rawManifest, &mf); err != nil {
		return Image{}, err
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(rawConfig, &cfg); err != nil {
		return Image{}, err
	}
	if len(mf.Layers) == 0 || len(mf.Layers) > c.opts.MaxLayers {
		return Image{}, wire.Errorf(wire.CodeBadRequest, "image %s would have %d layers, over %d", refs[0], len(mf.Layers), c.opts.MaxLayers)
	}
	layers := make([]string, len(mf.Layers))
	for i, l := range mf.Layers {
		layers[i] = l.Digest.String()
	}
	c.hold(append([]string{digest}, layers...)...)
	defer c.unhold(append([]string{digest}, layers...)...)
	top := mf.Layers[len(mf.Layers)-1]
	if top.Digest.String() != b.Layer.Digest {
		return Image{}, fmt.Errorf("image %s: its top layer is %s, not the build's %s", refs[0], top.Digest, b.Layer.Digest)
	}
	bud := &budget{maxEntries: c.opts.MaxImageEntries, maxBytes: c.opts.MaxImageBytes}
	c.mu.Lock()
	for _, l := range layers[:len(layers)-1] {
		rec := c.layers[l]
		if rec == nil {
			c.mu.Unlock()
			return Image{}, fmt.Errorf("image %s: its base's layer %s is no longer in the cache", refs[0], l)
		}
		if err := bud.take(rec.Entries, rec.Bytes); err != nil {
			c.mu.Unlock()
			return Image{}, &LayerError{Image: refs[0], Layer: l, Err: err}
		}
	}
	have := c.layers[top.Digest.String()] != nil
	c.mu.Unlock()
	if !have {
		err := c.unpackInto(top, sources[0], func(rootFd int) (unpacked, error) { return unpackFile(ctx, b.Layer, rootFd, bud) })
		if err != nil {
			var ee *entryError
			if errors.As(err, &ee) {
				return Image{}, &LayerError{Image: refs[0], Layer: b.Layer.Digest, Entry: ee.entry, Err: ee.err}
			}
			return Image{}, c.hidePaths(fmt.Errorf("image %s: layer %s: %w", refs[0], b.Layer.Digest, err))
		}
	}
	for _, l := range layers {
		for _, s := range sources {
			if err := c.addSource(l, s); err != nil {
				return Image{}, c.hidePaths(err)
			}
		}
	}

	c.mu.Lock()
	now := time.Now().UTC()
	rec := c.images[digest]
	if rec == nil {
		rec = &imageRecord{Format: format, Digest: digest, Layers: layers, Pulled: now,
			Config: Config{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
				Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd}}
	}
	rec.Manifest, rec.ConfigFile, rec.LastUsed = rawManifest, rawConfig, now
	for _, r := range refs {
		addTo(&rec.Refs, r)
	}
	for _, s := range sources {
		addTo(&rec.Sources, s)
	}
	var err error
	for _, r := range refs {
		// A tag names one image: the latest build takes it.
		if err = c.untag(r, digest); err != nil {
			break
		}
	}
	if err == nil {
		err = c.writeImage(rec, true)
	}
	var out Image
	if err == nil {
		c.images[digest] = rec
		if b.Holder != "" {
			err = c.pin(b.Holder, digest)
		}
		out = c.image(rec, refs[0])
	}
	c.mu.Unlock()
	if err != nil {
		return Image{}, c.hidePaths(fmt.Errorf("image %s: %w", refs[0], internal(err)))
	}
	c.evict()
	return out, nil
}

// unpackFile unpacks the layer blob lf into rootFd, checking that the
// file is still the blob its digest names.
func unpackFile(ctx context.Context, lf LayerFile, rootFd int, b *budget) (unpacked, error) {
	f, err := os.Open(lf.Path)
	if err != nil {
		return unpacked{}, internal(err)
	}
	defer f.Close()
	sum := &hashCounter{h: sha256.New()}
	dr, err := decompress(bufio.NewReaderSize(io.TeeReader(f, sum), 256<<10))
	if err != nil {
		return unpacked{}, err
	}
	defer dr.Close()
	res, err := unpackLayer(ctx, dr, rootFd, b)
	if err != nil {
		return res, err
	}
	if _, err := io.Copy(io.Discard, io.TeeReader(f, sum)); err != nil {
		return res, internal(err)
	}
	if sum.digest() != lf.Digest || sum.n != lf.Size {
		return res, fmt.Errorf("the layer's file changed after it was written: %w", errDigest)
	}
	return res, nil
}

// fileLayer is a LayerFile as go-containerregistry's layer, read from the
// file whenever a push needs it.
type fileLayer struct {
	f  LayerFile
	mt types.MediaType
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error)            { return v1.NewHash(l.f.Digest) }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return v1.NewHash(l.f.DiffID) }
func (l *fileLayer) Size() (int64, error)                { return l.f.Size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.f.Path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.f.Path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &readCloser{Reader: zr, close: func() error { zr.Close(); return f.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }
