package image

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-mcp/berth/internal/wire"
)

// Defaults of Options.
const (
	DefaultCacheBytes      = 20 << 30
	DefaultMaxImageBytes   = 8 << 30
	DefaultMaxImageEntries = 500_000
	// DefaultMaxLayers is overlayfs's practical bound and Docker's.
	DefaultMaxLayers = 127
	defaultJobs      = 3
	// maxConfigBytes bounds an image's config blob, read into memory; real
	// ones are a few KiB, with a long history some hundred.
	maxConfigBytes = 4 << 20
)

// Options configure a Cache.
type Options struct {
	// Dir is the cache's directory, berth's alone (made 0700); the local
	// runtime's is <data-dir>/image-cache.
	Dir string
	// MaxBytes is the cache's size (--image-cache-size): past it the
	// least recently used images that no holder pins are removed. Images
	// in use are never removed, so the cache may exceed it while they are.
	MaxBytes int64
	// MaxImageBytes and MaxImageEntries bound one image's unpacked files
	// (declared sizes, so a sparse file counts whole) and entries;
	// MaxImageBytes is at most MaxBytes. MaxLayers bounds its layers.
	MaxImageBytes   int64
	MaxImageEntries int64
	MaxLayers       int
	// Jobs is how many layers download at once.
	Jobs int
	// PlainHTTP lists registries (host:port as in references) reached
	// over plain HTTP; every other is HTTPS only.
	PlainHTTP []string
	// Transport carries registry requests (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Platform is the one picked from a multi-platform image (default:
	// linux and this binary's architecture).
	Platform *v1.Platform
	Logger   *slog.Logger
}

// Image is a cached image, ready to be a sandbox's root filesystem.
type Image struct {
	// Ref is the normalized reference it was asked by ("" from Lookup).
	Ref string
	// Digest is its manifest's: Lookup(Digest) finds it again with no
	// registry, and a sandbox should keep it to mount the same image
	// after a restart.
	Digest string
	// Layers are the layers' directories, lowest first (overlayfs's
	// lowerdir lists them the other way round). Each is read-only to
	// everyone but berth, shared by every image that has the layer, and
	// holds the image's own uids and gids (0 is host root: mount it
	// idmapped onto the sandbox's block) with whiteouts as overlayfs
	// writes them (0/0 character devices; opaque directories with both
	// trusted.overlay.opaque and user.overlay.opaque). Mount them
	// nosuid,nodev as well: unpacking strips setuid and skips devices.
	// Layers under one that makes the root opaque are left out.
	Layers []string
	Config Config
	// Size is the bytes its layers take on disk, about.
	Size int64
	// Notes say what unpacking neutralised or skipped, for the operator.
	Notes []string
}

// Config is what of the image's config a sandbox honours.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Entry is one cached image, as List shows it.
type Entry struct {
	Digest  string   `json:"digest"`
	Refs    []string `json:"refs"`
	Size    int64    `json:"size"`
	Holders int      `json:"holders"`
	// HeldBy names the holders.
	HeldBy   []string  `json:"held_by,omitempty"`
	Pulled   time.Time `json:"pulled"`
	LastUsed time.Time `json:"last_used"`
}

// Cache is the host's image cache. One process owns a cache directory
// (berth's data directory lock makes it so); its methods are safe for
// concurrent use.
type Cache struct {
	opts      Options
	dir       string
	transport http.RoundTripper
	platform  v1.Platform
	log       *slog.Logger
	boot      string

	// The background sync that makes unpacked layers durable (see
	// layerRecord.Synced): at most one runs; Close waits for it.
	syncs      sync.WaitGroup
	syncing    bool
	syncWanted bool

	trashMu sync.Mutex // one emptying of the trash at a time

	mu      sync.Mutex
	layers  map[string]*layerRecord // by blob digest
	images  map[string]*imageRecord // by manifest digest
	pins    map[string]string       // holder -> manifest digest
	busy    map[string]int          // image and layer digests an Ensure is using
	flights map[string]*flight
}

// Open opens (making it when missing) the cache in opts.Dir, throws away
// what a crash left half done, and trims it to its size.
func Open(opts Options) (*Cache, error) {
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("image cache: directory %q is not absolute", opts.Dir)
	}
	if os.Geteuid() != 0 {
		// Layers keep the image's owners and whiteouts are device nodes.
		return nil, errors.New("image cache: berth must run as root to unpack images")
	}
	opts.MaxBytes = cmp.Or(opts.MaxBytes, DefaultCacheBytes)
	opts.MaxImageBytes = min(cmp.Or(opts.MaxImageBytes, DefaultMaxImageBytes), opts.MaxBytes)
	opts.MaxImageEntries = cmp.Or(opts.MaxImageEntries, DefaultMaxImageEntries)
	opts.MaxLayers = cmp.Or(opts.MaxLayers, DefaultMaxLayers)
	opts.Jobs = cmp.Or(opts.Jobs, defaultJobs)
	plain := make([]string, len(opts.PlainHTTP))
	for i, h := range opts.PlainHTTP {
		plain[i] = strings.ToLower(h)
	}
	opts.PlainHTTP = plain
	c := &Cache{
		opts:    opts,
		dir:     filepath.Clean(opts.Dir),
		log:     cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		layers:  map[string]*layerRecord{},
		images:  map[string]*imageRecord{},
		pins:    map[string]string{},
		busy:    map[string]int{},
		flights: map[string]*flight{},
		boot:    bootID(),
	}
	base := opts.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.transport = &httpsOnly{next: base, plainHTTP: opts.PlainHTTP}
	c.platform = v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}
	if opts.Platform != nil {
		c.platform = *opts.Platform
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for _, d := range []string{layersDir, imagesDir, pinsDir, tmpDir, trashDir} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
	}
	for _, d := range []string{tmpDir, trashDir} {
		if err := emptyDir(filepath.Join(c.dir, d)); err != nil {
			return nil, fmt.Errorf("image cache: clear %s: %w", d, err)
		}
	}
	spreadLayers(filepath.Join(c.dir, tmpDir))
	if err := c.load(); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	c.evict()
	// Layers berth unpacked in this boot before it stopped: sync them.
	c.mu.Lock()
	for _, l := range c.layers {
		if !l.Synced {
			c.syncLater()
			break
		}
	}
	c.mu.Unlock()
	return c, nil
}

func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// load reads the records, dropping what is incomplete or of another
// format.
func (c *Cache) load() error {
	entries, err := os.ReadDir(filepath.Join(c.dir, layersDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		var rec layerRecord
		p := filepath.Join(c.dir, layersDir, e.Name())
		err := readJSON(filepath.Join(p, layerFile), &rec)
		k, kerr := key(rec.Digest)
		torn := !rec.Synced && rec.Boot != c.boot
		if err != nil || kerr != nil || rec.Format != format || k != e.Name() || torn {
			c.log.Warn("image cache: removing a layer it cannot use", "layer", e.Name(), "err", err, "unsynced_before_a_host_crash", torn)
			if err := c.trash(p); err != nil {
				return err
			}
			continue
		}
		c.layers[rec.Digest] = &rec
	}
	entries, err = os.ReadDir(filepath.Join(c.dir, imagesDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(c.dir, imagesDir, e.Name())
		var rec imageRecord
		err := readJSON(p, &rec)
		ok := err == nil && rec.Format == format && digestRe.MatchString(rec.Digest)
		for _, l := range rec.Layers {
			ok = ok && c.layers[l] != nil
		}
		if !ok {
			c.log.Warn("image cache: removing an image record it cannot use", "record", e.Name(), "err", err)
			if err := os.Remove(p); err != nil {
				return err
			}
			continue
		}
		c.images[rec.Digest] = &rec
	}
	entries, err = os.ReadDir(filepath.Join(c.dir, pinsDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(c.dir, pinsDir, e.Name()))
		if err != nil {
			return err
		}
		if d := strings.TrimSpace(string(data)); digestRe.MatchString(d) && holderRe.MatchString(e.Name()) {
			c.pins[e.Name()] = d
		}
	}
	return c.emptyTrash()
}

// trash moves a directory out of the cache's view at once; emptyTrash
// removes it later, outside the lock.
func (c *Cache) trash(p string) error {
	t, err := os.MkdirTemp(filepath.Join(c.dir, trashDir), "x")
	if err != nil {
		return err
	}
	return os.Rename(p, filepath.Join(t, "x"))
}

func (c *Cache) emptyTrash() error {
	c.trashMu.Lock()
	defer c.trashMu.Unlock()
	return emptyDir(filepath.Join(c.dir, trashDir))
}

func (c *Cache) layerRoot(digest string) string {
	k, _ := key(digest)
	return filepath.Join(c.dir, layersDir, k, rootDir)
}

// image builds the Image of rec; c.mu is held.
func (c *Cache) image(rec *imageRecord, ref string) Image {
	img := Image{Ref: ref, Digest: rec.Digest, Config: rec.Config}
	first := 0
	for i, l := range rec.Layers {
		if c.layers[l].RootOpaque {
			first = i
		}
	}
	for _, l := range rec.Layers[first:] {
		lr := c.layers[l]
		img.Layers = append(img.Layers, c.layerRoot(l))
		img.Size += lr.DiskBytes
		for _, n := range lr.Notes {
			if len(img.Notes) < maxNotes {
				img.Notes = append(img.Notes, "layer "+lr.Digest+": "+n)
			}
		}
	}
	return img
}

// find is the record of digest (a manifest's, or an index's that chose
// one); c.mu is held.
func (c *Cache) find(digest string) *imageRecord {
	if rec := c.images[digest]; rec != nil {
		return rec
	}
	for _, rec := range c.images {
		if slices.Contains(rec.Indexes, digest) {
			return rec
		}
	}
	return nil
}

// Lookup is the cached image of a manifest (or index) digest, with no
// registry: for a holder that already has it, such as a sandbox mounting
// its image again after a restart. It is no proof that anyone may read
// the image; Ensure is.
func (c *Cache) Lookup(digest string) (Image, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.find(digest)
	if rec == nil {
		return Image{}, wire.Errorf(wire.CodeNotFound, "image %s is not in the cache", digest)
	}
	c.touch(rec)
	return c.image(rec, ""), nil
}

// touch marks rec used now; c.mu is held.
func (c *Cache) touch(rec *imageRecord) {
	rec.LastUsed = time.Now().UTC()
	if err := c.writeImage(rec, false); err != nil {
		c.log.Warn("image cache: record an image's use", "image", rec.Digest, "err", err)
	}
}

// writeImage writes rec; durable for a new image (a record lost in a
// host crash leaves its layers to eviction), not for a mere use.
func (c *Cache) writeImage(rec *imageRecord, durable bool) error {
	k, err := key(rec.Digest)
	if err != nil {
		return err
	}
	return writeJSON(filepath.Join(c.dir, imagesDir, k+".json"), rec, durable)
}

// Pin keeps the image of digest in the cache while holder (a sandbox's
// id) uses it, across restarts of berth, until Release(holder). A holder
// pins one image; pinning another moves its pin.
func (c *Cache) Pin(holder, digest string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pin(holder, digest)
}

// pin: c.mu is held.
func (c *Cache) pin(holder, digest string) error {
	if !holderRe.MatchString(holder) {
		return fmt.Errorf("image cache: %q cannot hold an image (letters, digits, '_', '.', '-')", holder)
	}
	rec := c.find(digest)
	if rec == nil {
		return wire.Errorf(wire.CodeNotFound, "image %s is not in the cache", digest)
	}
	if c.pins[holder] == rec.Digest {
		return nil
	}
	tmp := filepath.Join(c.dir, pinsDir, "."+holder)
	if err := os.WriteFile(tmp, []byte(rec.Digest+"\n"), 0o600); err != nil {
		return fmt.Errorf("image cache: pin: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, pinsDir, holder)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image cache: pin: %w", err)
	}
	c.pins[holder] = rec.Digest
	c.touch(rec)
	return nil
}

// Release drops holder's pin, if it has one; its image stays cached until
// the cache needs the room.
func (c *Cache) Release(holder string) error {
	c.mu.Lock()
	digest, ok := c.pins[holder]
	if ok {
		err := os.Remove(filepath.Join(c.dir, pinsDir, holder))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.mu.Unlock()
			return fmt.Errorf("image cache: release: %w", err)
		}
		delete(c.pins, holder)
		if rec := c.images[digest]; rec != nil {
			c.touch(rec)
		}
	}
	c.mu.Unlock()
	if ok {
		c.evict()
	}
	return nil
}

// Holders lists the holders that pin an image, so that an owner of
// holders (the local runtime) can release those that are gone.
func (c *Cache) Holders() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pins))
	for h := range c.pins {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Limit is the cache's size (Options.MaxBytes, defaulted).
func (c *Cache) Limit() int64 { return c.opts.MaxBytes }

// List shows the cached images, most recently used first.
func (c *Cache) List() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	holders := map[string]int{}
	heldBy := map[string][]string{}
	for h, d := range c.pins {
		holders[d]++
		heldBy[d] = append(heldBy[d], h)
	}
	out := make([]Entry, 0, len(c.images))
	for _, rec := range c.images {
		slices.Sort(heldBy[rec.Digest])
		e := Entry{Digest: rec.Digest, Refs: slices.Clone(rec.Refs), Holders: holders[rec.Digest], HeldBy: heldBy[rec.Digest],
			Pulled: rec.Pulled, LastUsed: rec.LastUsed}
		for _, l := range rec.Layers {
			e.Size += c.layers[l].DiskBytes
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(b.LastUsed.Compare(a.LastUsed), strings.Compare(a.Digest, b.Digest))
	})
	return out
}

// Size is the bytes the cached layers take, about.
func (c *Cache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size()
}

func (c *Cache) size() int64 {
	var n int64
	for _, l := range c.layers {
		n += l.DiskBytes
	}
	return n
}

// evict removes least recently used images no holder pins and no Ensure
// is using until the cache fits its size, then the layers no image has
// left.
func (c *Cache) evict() {
	c.mu.Lock()
	pinned := map[string]bool{}
	for _, d := range c.pins {
		pinned[d] = true
	}
	var victims []*imageRecord
	for _, rec := range c.images {
		if !pinned[rec.Digest] && c.busy[rec.Digest] == 0 {
			victims = append(victims, rec)
		}
	}
	slices.SortFunc(victims, func(a, b *imageRecord) int { return a.LastUsed.Compare(b.LastUsed) })
	for total := c.size(); ; {
		// Layers of no image first: a pull that failed half way, an
		// image evicted before.
		total -= c.dropOrphans()
		if total <= c.opts.MaxBytes || len(victims) == 0 {
			break
		}
		rec := victims[0]
		victims = victims[1:]
		k, _ := key(rec.Digest)
		if err := os.Remove(filepath.Join(c.dir, imagesDir, k+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("image cache: evict", "image", rec.Digest, "err", err)
			continue
		}
		delete(c.images, rec.Digest)
		c.log.Info("image cache: evicted", "image", rec.Digest, "refs", rec.Refs, "last_used", rec.LastUsed)
	}
	c.mu.Unlock()
	if err := c.emptyTrash(); err != nil {
		c.log.Warn("image cache: remove evicted layers", "err", err)
	}
}

// dropOrphans moves the layers no image record uses and no Ensure is
// using to the trash, and says how many bytes they took; c.mu is held.
func (c *Cache) dropOrphans() int64 {
	used := map[string]bool{}
	for _, rec := range c.images {
		for _, l := range rec.Layers {
			used[l] = true
		}
	}
	var freed int64
	for id, l := range c.layers {
		if used[id] || c.busy[id] > 0 {
			continue
		}
		k, _ := key(id)
		if err := c.trash(filepath.Join(c.dir, layersDir, k)); err != nil {
			c.log.Warn("image cache: evict layer", "layer", id, "err", err)
			continue
		}
		delete(c.layers, id)
		freed += l.DiskBytes
	}
	return freed
}

// hold keeps the digests (an image's and its layers') from eviction
// while an Ensure works on them; release undoes it.
func (c *Cache) hold(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.busy[id]++
	}
}

func (c *Cache) unhold(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.busy[id]--; c.busy[id] <= 0 {
			delete(c.busy, id)
		}
	}
}

// addSource records that source's registry served layer digest too.
func (c *Cache) addSource(digest, source string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.layers[digest]
	if rec == nil {
		return internal(fmt.Errorf("layer %s is gone", digest))
	}
	updated := *rec
	updated.Sources = slices.Clone(rec.Sources)
	if !addTo(&updated.Sources, source) {
		return nil
	}
	k, _ := key(digest)
	if err := writeJSON(filepath.Join(c.dir, layersDir, k, layerFile), &updated, false); err != nil {
		return internal(err)
	}
	c.layers[digest] = &updated
	return nil
}

// syncLater makes the layers unpacked so far durable, in the
// background: a pull does not wait for the disk, and a host crash before
// the sync costs only a new pull of the layers it caught. c.mu is held.
func (c *Cache) syncLater() {
	c.syncWanted = true
	if c.syncing {
		return
	}
	c.syncing = true
	c.syncs.Add(1)
	go c.syncLoop()
}

func (c *Cache) syncLoop() {
	defer c.syncs.Done()
	for {
		c.mu.Lock()
		if !c.syncWanted {
			c.syncing = false
			c.mu.Unlock()
			return
		}
		c.syncWanted = false
		var pending []string
		for d, l := range c.layers {
			if !l.Synced {
				pending = append(pending, d)
			}
		}
		c.mu.Unlock()

		if err := syncfs(c.dir); err != nil {
			c.log.Warn("image cache: sync unpacked layers", "err", err)
			continue
		}
		c.mu.Lock()
		for _, d := range pending {
			rec := c.layers[d]
			if rec == nil || rec.Synced {
				continue // evicted meanwhile
			}
			updated := *rec
			updated.Synced = true
			k, _ := key(d)
			if err := writeJSON(filepath.Join(c.dir, layersDir, k, layerFile), &updated, false); err != nil {
				c.log.Warn("image cache: record a synced layer", "layer", d, "err", err)
				continue
			}
			c.layers[d] = &updated
		}
		c.mu.Unlock()
	}
}

// Close waits for the background sync of unpacked layers. The cache is
// not to be used after.
func (c *Cache) Close() error {
	c.syncs.Wait()
	return nil
}

// LookupRef is the cached image a reference names (as Ensure or
// AddBuild gave it), with no registry, pinned for holder when one is
// given: for the local images of builds (LocalDomain), which no registry
// has. Like Lookup it proves no access.
func (c *Cache) LookupRef(ref, holder string) (Image, error) {
	named, err := parse(ref)
	if err != nil {
		return Image{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.byRef(named.String())
	if rec == nil {
		return Image{}, wire.Errorf(wire.CodeNotFound, "image %s is not in the cache", named)
	}
	if holder != "" {
		if err := c.pin(holder, rec.Digest); err != nil {
			return Image{}, err
		}
	} else {
		c.touch(rec)
	}
	return c.image(rec, named.String()), nil
}

// HasRef says whether a cached image has the normalized reference ref.
func (c *Cache) HasRef(ref string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byRef(ref) != nil
}

// byRef is the image that has ref (normalized); c.mu is held.
func (c *Cache) byRef(ref string) *imageRecord {
	for _, rec := range c.images {
		if slices.Contains(rec.Refs, ref) {
			return rec
		}
	}
	return nil
}

// Untag takes the normalized reference ref from the image that has it:
// the image stays, under its other names, until it is evicted.
func (c *Cache) Untag(ref string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.untag(ref, "")
}

// untag takes ref from every image but keep's; c.mu is held.
func (c *Cache) untag(ref, keep string) error {
	for _, rec := range c.images {
		if rec.Digest == keep || !slices.Contains(rec.Refs, ref) {
			continue
		}
		updated := *rec
		updated.Refs = slices.DeleteFunc(slices.Clone(rec.Refs), func(r string) bool { return r == ref })
		if err := c.writeImage(&updated, false); err != nil {
			return fmt.Errorf("image cache: untag %s: %w", ref, err)
		}
		c.images[rec.Digest] = &updated
	}
	return nil
}

// LocalNames are the names of the local images tagged latest
// (LocalDomain/NAME:latest), sorted.
func (c *Cache) LocalNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := LocalDomain + "/"
	var names []string
	for _, rec := range c.images {
		for _, r := range rec.Refs {
			if n, ok := strings.CutPrefix(r, prefix); ok {
				if n, ok = strings.CutSuffix(n, ":latest"); ok {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ImageLimits are one image's bounds: entries and declared bytes.
func (c *Cache) ImageLimits() (entries, bytes int64) {
	return c.opts.MaxImageEntries, c.opts.MaxImageBytes
}
