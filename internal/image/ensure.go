package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/errgroup"

	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

// Pull is how Ensure pulls.
type Pull struct {
	// Credentials are presented to the image's registry (zero:
	// anonymous). They prove the caller may read the image even when the
	// cache has it already.
	Credentials Credentials
	// Progress, when set, hears how far the pull is; never after Ensure
	// returned.
	Progress func(Progress)
	// Holder, when set, pins the image for it (see Pin) before Ensure
	// returns, so no eviction comes in between.
	Holder string
}

// Ensure makes the image ref (any reference Normalize takes) ready in the
// cache and returns it. It always asks the image's registry, with the
// caller's credentials: a tag may have moved, and a caller must prove it
// may read an image another namespace pulled. The content comes from the
// cache when the same repository's registry served it before; everything
// else is downloaded, checked against its digest, and unpacked once per
// layer however many Ensures want it at the same time.
//
// Errors a user can act on (a bad reference, an image the registry does
// not have or will not give these credentials, a hostile or oversized
// layer) are 400s naming the image, and the layer and entry when there is
// one.
func (c *Cache) Ensure(ctx context.Context, ref string, p Pull) (Image, error) {
	named, err := parse(ref)
	if err != nil {
		return Image{}, err
	}
	if reference.Domain(named) == LocalDomain {
		return Image{}, localError(named)
	}
	if p.Holder != "" && !holderRe.MatchString(p.Holder) {
		return Image{}, fmt.Errorf("image cache: %q cannot hold an image", p.Holder)
	}
	rref, err := remoteRef(named, c.opts.PlainHTTP)
	if err != nil {
		return Image{}, wire.Errorf(wire.CodeBadRequest, "%v", err)
	}
	e := &ensure{c: c, named: named, ref: rref, source: named.Name(), pull: p,
		opts: []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(p.Credentials),
			remote.WithTransport(c.transport), remote.WithPlatform(c.platform),
			remote.WithUserAgent("berth/" + version.Version)}}
	img, err := e.run(ctx)
	if err != nil {
		return Image{}, c.hidePaths(err)
	}
	return img, nil
}

// hidePaths keeps the cache's own failures (a full disk, say) from
// showing its host path to a client; berth's log has the whole error.
func (c *Cache) hidePaths(err error) error {
	var ce *cacheError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.dir) {
		return err
	}
	c.log.Error("image cache", "err", err)
	return errors.New(strings.ReplaceAll(err.Error(), c.dir, "<image cache>"))
}

// ensure is one Ensure call.
type ensure struct {
	c      *Cache
	named  reference.Named
	ref    name.Reference
	source string // the repository, normalized: docker.io/library/python
	pull   Pull
	opts   []remote.Option
}

func (e *ensure) run(ctx context.Context) (Image, error) {
	digest, err := e.resolve()
	if err != nil {
		return Image{}, err
	}
	if img, ok, err := e.use(digest, ""); ok || err != nil {
		return img, err
	}
	return e.fetch(ctx, digest)
}

// resolve asks the registry, with the caller's credentials, which
// manifest the reference names. A HEAD is enough (and does not count
// against Docker Hub's pull limit); registries that answer it badly get
// a GET.
func (e *ensure) resolve() (string, error) {
	desc, err := remote.Head(e.ref, e.opts...)
	if err != nil && !refusal(err) {
		var d *remote.Descriptor
		if d, err = remote.Get(e.ref, e.opts...); err == nil {
			desc = &d.Descriptor
		}
	}
	if err != nil {
		return "", e.registryError(err)
	}
	return desc.Digest.String(), nil
}

// refusal says whether the registry refused (no such image, or not for
// these credentials), which a GET would only repeat.
func refusal(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
	}
	return false
}

func (e *ensure) registryError(err error) error {
	if refusal(err) {
		how := "anonymously"
		if e.pull.Credentials.has(e.ref.Context().RegistryStr()) {
			how = "with the credentials berth has for it"
		}
		return wire.Errorf(wire.CodeBadRequest, "image %s: the registry has no such image or will not give it %s: %v", e.named, how, err)
	}
	return wire.Errorf(wire.CodeBadGateway, "image %s: %v", e.named, err)
}

// use returns the cached image of digest when this repository's registry
// served it before, pinned for the holder; index is the index digest that
// chose it, to remember.
func (e *ensure) use(digest, index string) (Image, bool, error) {
	img, ok, err := e.useLocked(digest, index)
	if ok && e.pull.Progress != nil {
		n := len(img.Layers)
		e.pull.Progress(Progress{Ref: e.named.String(), LayersTotal: n, LayersDone: n})
	}
	return img, ok, err
}

func (e *ensure) useLocked(digest, index string) (Image, bool, error) {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.find(digest)
	if rec == nil || !slices.Contains(rec.Sources, e.source) {
		return Image{}, false, nil
	}
	addTo(&rec.Refs, e.named.String())
	if index != "" {
		addTo(&rec.Indexes, index)
	}
	c.touch(rec)
	if e.pull.Holder != "" {
		if err := c.pin(e.pull.Holder, rec.Digest); err != nil {
			return Image{}, false, err
		}
	}
	return c.image(rec, e.named.String()), true, nil
}

// fetch pulls the image of digest: its manifest and config, checked
// against their digests, then its layers.
func (e *ensure) fetch(ctx context.Context, digest string) (Image, error) {
	c := e.c
	desc, err := remote.Get(e.ref.Context().Digest(digest), e.opts...)
	if err != nil {
		return Image{}, e.registryError(err)
	}
	img, err := desc.Image()
	if err != nil {
		return Image{}, wire.Errorf(wire.CodeBadRequest, "image %s: no image for %s: %v", e.named, platformString(c.platform), err)
	}
	h, err := img.Digest()
	if err != nil {
		return Image{}, e.registryError(err)
	}
	index := ""
	if h.String() != digest {
		index = digest
		if got, ok, err := e.use(h.String(), index); ok || err != nil {
			return got, err
		}
	}
	mf, err := img.Manifest()
	if err != nil {
		return Image{}, e.registryError(err)
	}
	if mf.Config.Size > maxConfigBytes {
		return Image{}, wire.Errorf(wire.CodeBadRequest, "image %s: its config is %d bytes, over %d", e.named, mf.Config.Size, maxConfigBytes)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Image{}, e.registryError(err)
	}
	if err := e.check(mf, cfg); err != nil {
		return Image{}, err
	}
	rec := &imageRecord{Format: format, Digest: h.String(), Refs: []string{e.named.String()}, Sources: []string{e.source},
		Config: Config{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
			Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd}}
	if index != "" {
		rec.Indexes = []string{index}
	}
	sizes := make([]int64, len(mf.Layers))
	for i, l := range mf.Layers {
		rec.Layers = append(rec.Layers, l.Digest.String())
		sizes[i] = l.Size
	}
	c.hold(append([]string{rec.Digest}, rec.Layers...)...)
	defer c.unhold(append([]string{rec.Digest}, rec.Layers...)...)

	prog := newProgress(e.named.String(), e.pull.Progress, sizes)
	defer prog.close()
	prog.start()
	b := &budget{maxEntries: c.opts.MaxImageEntries, maxBytes: c.opts.MaxImageBytes}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Jobs)
	for i, l := range mf.Layers {
		g.Go(func() error {
			return e.layer(gctx, i, l, b, prog)
		})
	}
	if err := g.Wait(); err != nil {
		return Image{}, err
	}

	c.mu.Lock()
	now := time.Now().UTC()
	if old := c.images[rec.Digest]; old != nil {
		for _, r := range rec.Refs {
			addTo(&old.Refs, r)
		}
		addTo(&old.Sources, e.source)
		for _, ix := range rec.Indexes {
			addTo(&old.Indexes, ix)
		}
		rec = old
	} else {
		rec.Pulled = now
	}
	rec.LastUsed = now
	err = c.writeImage(rec, true)
	if err == nil {
		c.images[rec.Digest] = rec
		if e.pull.Holder != "" {
			err = c.pin(e.pull.Holder, rec.Digest)
		}
	}
	var out Image
	if err == nil {
		out = c.image(rec, e.named.String())
	}
	c.mu.Unlock()
	if err != nil {
		return Image{}, fmt.Errorf("image %s: %w", e.named, err)
	}
	c.evict()
	return out, nil
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// check refuses an image this host cannot run or that is malformed.
func (e *ensure) check(mf *v1.Manifest, cfg *v1.ConfigFile) error {
	c := e.c
	if cfg.OS != "" && cfg.OS != c.platform.OS || cfg.Architecture != "" && cfg.Architecture != c.platform.Architecture {
		return wire.Errorf(wire.CodeBadRequest, "image %s is for %s/%s; this host runs %s", e.named, cfg.OS, cfg.Architecture, platformString(c.platform))
	}
	if len(mf.Layers) != len(cfg.RootFS.DiffIDs) {
		return wire.Errorf(wire.CodeBadRequest, "image %s: its manifest has %d layers and its config %d", e.named, len(mf.Layers), len(cfg.RootFS.DiffIDs))
	}
	if len(mf.Layers) > c.opts.MaxLayers {
		return wire.Errorf(wire.CodeBadRequest, "image %s has %d layers, over %d", e.named, len(mf.Layers), c.opts.MaxLayers)
	}
	for i, l := range mf.Layers {
		if _, err := key(l.Digest.String()); err != nil {
			return wire.Errorf(wire.CodeBadRequest, "image %s: layer %d: %v", e.named, i, err)
		}
		if _, err := decompression(l.MediaType); err != nil {
			return wire.Errorf(wire.CodeBadRequest, "image %s: layer %s: %v", e.named, l.Digest, err)
		}
	}
	return nil
}

// LayerError is a layer berth refused: unreadable, not matching its
// digest, or hostile. A 400: the image is the caller's choice.
type LayerError struct {
	Image string // normalized reference
	Layer string // the layer blob's digest
	Entry string // the tar entry, when one is to blame
	Err   error
}

func (e *LayerError) Error() string {
	if e.Entry != "" {
		return fmt.Sprintf("image %s: layer %s: entry %q: %v", e.Image, e.Layer, e.Entry, e.Err)
	}
	return fmt.Sprintf("image %s: layer %s: %v", e.Image, e.Layer, e.Err)
}

func (e *LayerError) Unwrap() error { return e.Err }

// As makes a LayerError a bad request to wire.DetailOf.
func (e *LayerError) As(target any) bool {
	if t, ok := target.(**wire.ErrorDetail); ok {
		*t = &wire.ErrorDetail{Code: wire.CodeBadRequest, Message: e.Error()}
		return true
	}
	return false
}

func (e *ensure) layerError(l v1.Descriptor, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("image %s: layer %s: %w", e.named, l.Digest, err)
	}
	var ce *cacheError
	if errors.As(err, &ce) {
		return fmt.Errorf("image %s: layer %s: %w", e.named, l.Digest, err)
	}
	var fe *fetchError
	if errors.As(err, &fe) {
		return wire.Errorf(wire.CodeBadGateway, "image %s: layer %s: %v", e.named, l.Digest, err)
	}
	var d *wire.ErrorDetail
	if errors.As(err, &d) {
		return err // the registry's answer, already saying which image
	}
	le := &LayerError{Image: e.named.String(), Layer: l.Digest.String(), Err: err}
	var ee *entryError
	if errors.As(err, &ee) {
		le.Entry, le.Err = ee.entry, ee.err
	}
	return le
}

// layer makes layer i ready: cached and served by this repository's
// registry before, or waited for while another Ensure works on it, or
// downloaded here (unpacked when new, only checked when cached from
// another repository).
func (e *ensure) layer(ctx context.Context, i int, l v1.Descriptor, b *budget, prog *progress) error {
	c := e.c
	id := l.Digest.String()
	for {
		c.mu.Lock()
		rec := c.layers[id]
		if rec != nil && slices.Contains(rec.Sources, e.source) {
			c.mu.Unlock()
			if err := b.take(rec.Entries, rec.Bytes); err != nil {
				return e.layerError(l, err)
			}
			prog.finish(i, l.Size)
			return nil
		}
		fkey := "unpack " + id
		if rec != nil {
			fkey = "verify " + id + " " + e.source
		}
		if f := c.flights[fkey]; f != nil {
			stop := f.subscribe(func(n int64) { prog.set(i, n) })
			c.mu.Unlock()
			select {
			case <-f.done:
				stop()
			case <-ctx.Done():
				stop()
				return e.layerError(l, ctx.Err())
			}
			// Done or failed, look again: a failure was the other
			// Ensure's (its context, its registry); this one tries itself.
			if f.err != nil && ctx.Err() != nil {
				return e.layerError(l, ctx.Err())
			}
			if f.err != nil && f.owner == e {
				return f.err
			}
			continue
		}
		f := &flight{done: make(chan struct{}), owner: e, sinks: map[int]func(int64){}}
		c.flights[fkey] = f
		c.mu.Unlock()
		f.subscribe(func(n int64) { prog.set(i, n) })

		var err error
		if rec == nil {
			err = e.unpack(ctx, l, b, f.add)
		} else {
			err = e.verify(ctx, l, f.add)
		}
		if err != nil {
			err = e.layerError(l, err)
		}
		c.mu.Lock()
		delete(c.flights, fkey)
		c.mu.Unlock()
		f.err = err
		close(f.done)
		if err != nil {
			return err
		}
		if rec != nil {
			if err := b.take(rec.Entries, rec.Bytes); err != nil {
				return e.layerError(l, err)
			}
		}
		prog.finish(i, l.Size)
		return nil
	}
}

// flight is a layer one Ensure is downloading, which others wait for.
type flight struct {
	done  chan struct{}
	err   error // set before done is closed
	owner *ensure

	mu    sync.Mutex
	bytes int64
	next  int
	sinks map[int]func(int64)
}

// add counts n more bytes downloaded and tells every waiter.
func (f *flight) add(n int64) {
	f.mu.Lock()
	f.bytes += n
	total := f.bytes
	sinks := make([]func(int64), 0, len(f.sinks))
	for _, s := range f.sinks {
		sinks = append(sinks, s)
	}
	f.mu.Unlock()
	for _, s := range sinks {
		s(total)
	}
}

func (f *flight) subscribe(s func(int64)) (stop func()) {
	f.mu.Lock()
	id := f.next
	f.next++
	f.sinks[id] = s
	total := f.bytes
	f.mu.Unlock()
	s(total)
	return func() {
		f.mu.Lock()
		delete(f.sinks, id)
		f.mu.Unlock()
	}
}

// cacheError is the cache's own failure (its disk), not the image's.
type cacheError struct{ err error }

func (e *cacheError) Error() string { return "image cache: " + e.err.Error() }
func (e *cacheError) Unwrap() error { return e.err }

func internal(err error) error { return &cacheError{err} }
