//go:build linux

package image

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func layerDirs(t *testing.T, c *Cache) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(c.dir, layersDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func layerKey(l testLayer) string {
	k, _ := key(l.Digest)
	return k
}

// TestEvictionKeepsPinnedImages fills a small cache: the least recently
// used image no holder pins goes, a pinned one stays however old, and a
// released one goes when room is needed.
func TestEvictionKeepsPinnedImages(t *testing.T) {
	r := newRegistry(t)
	// Each image is one layer of a 1 MiB file: three fit, four do not.
	c := openCache(t, r, Options{MaxBytes: 3<<20 + 3<<12})
	layers := map[string]testLayer{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		layers[n] = gzLayer(t, tarOf(t, file(n, randomBody(t, 1<<20))))
		r.Push(t, "evict/"+n+":1", imageSpec{}, layers[n])
	}
	ensure := func(n, holder string) Image {
		t.Helper()
		img, err := c.Ensure(context.Background(), r.Host+"/evict/"+n+":1", Pull{Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	has := func(names ...string) {
		t.Helper()
		var want []string
		for _, n := range names {
			want = append(want, layerKey(layers[n]))
		}
		slices.Sort(want)
		if got := layerDirs(t, c); !slices.Equal(got, want) {
			t.Fatalf("cached layers = %v, want those of %v", got, names)
		}
		var digests []string
		for _, e := range c.List() {
			digests = append(digests, e.Digest)
		}
		if len(digests) != len(names) {
			t.Fatalf("List has %d images, want %d", len(digests), len(names))
		}
	}
	imgA := ensure("a", "sandbox-a") // pinned, and the oldest
	ensure("b", "")
	ensure("c", "")
	has("a", "b", "c")
	ensure("d", "")
	has("a", "c", "d") // b was the least recently used unpinned
	ensure("c", "")    // c used again: d is now the oldest unpinned
	ensure("e", "")
	has("a", "c", "e")
	if _, err := os.Stat(imgA.Layers[0]); err != nil {
		t.Fatalf("the pinned image's layer: %v", err)
	}
	if got := c.List(); got[len(got)-1].Digest != imgA.Digest || got[len(got)-1].Holders != 1 {
		t.Fatalf("List = %+v, want a last (oldest) with 1 holder", got)
	}

	// A pin survives a restart of the cache.
	c.Close()
	c2, err := Open(c.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	c = c2
	if err := c.Release("sandbox-a"); err != nil {
		t.Fatal(err)
	}
	// Released, a is the most recently used: the next image evicts c.
	ensure("b", "")
	has("a", "e", "b")
	if _, err := c.Lookup(imgA.Digest); err != nil {
		t.Fatalf("a after release: %v", err)
	}
	if err := c.Pin("sandbox-x", "sha256:"+strings.Repeat("0", 64)); wire.DetailOf(err).Code != wire.CodeNotFound {
		t.Fatalf("pin of an uncached image: %v", err)
	}
	if err := c.Pin("../escape", imgA.Digest); err == nil {
		t.Fatal("a holder name with a path was accepted")
	}
}

// TestCrashLeftoversAreCleared opens a cache over what a crash leaves:
// half-unpacked layers in tmp, a layer directory without its record,
// an image record whose layer is gone.
func TestCrashLeftoversAreCleared(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	l := gzLayer(t, tarOf(t, file("f", "x")))
	r.Push(t, "crash:1", imageSpec{}, l)
	img, err := c.Ensure(context.Background(), r.Host+"/crash:1", Pull{})
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(c.dir, tmpDir, "sha256-abc-123", rootDir, "usr")
	os.MkdirAll(half, 0o755)
	os.WriteFile(filepath.Join(half, "half"), []byte("x"), 0o644)
	noRecord := filepath.Join(c.dir, layersDir, "sha256-"+strings.Repeat("1", 64), rootDir)
	os.MkdirAll(noRecord, 0o755)
	orphanImage := filepath.Join(c.dir, imagesDir, "sha256-"+strings.Repeat("2", 64)+".json")
	os.WriteFile(orphanImage, []byte(`{"format":1,"digest":"sha256:`+strings.Repeat("2", 64)+`","layers":["sha256:`+strings.Repeat("3", 64)+`"]}`), 0o600)

	c.Close()
	c2, err := Open(c.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	for _, p := range []string{filepath.Join(c.dir, tmpDir, "sha256-abc-123"), filepath.Dir(noRecord), orphanImage} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived Open: %v", p, err)
		}
	}
	if got, err := c2.Lookup(img.Digest); err != nil || got.Layers[0] != img.Layers[0] {
		t.Fatalf("the complete image: %+v, %v", got, err)
	}
	if n := len(c2.List()); n != 1 {
		t.Fatalf("List has %d images, want 1", n)
	}
}

// TestCredentials: a private repository needs the operator's (or a
// namespace's) credentials, a cached private image is not given to a
// caller without them, and no secret is printed.
func TestCredentials(t *testing.T) {
	r := newRegistry(t)
	const secret = "s3cret-pa55"
	r.RequireUser("private/", "robot:"+secret)
	c := openCache(t, r, Options{})
	l := gzLayer(t, tarOf(t, file("secret-sauce", "recipe")))
	r.RequireUser("private/", "") // push freely
	r.Push(t, "private/app:1", imageSpec{}, l)
	r.RequireUser("private/", "robot:"+secret)

	ref := r.Host + "/private/app:1"
	_, err := c.Ensure(context.Background(), ref, Pull{})
	if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, ref) {
		t.Fatalf("anonymous pull of a private image: %v (%s), want a 400 naming it", err, d.Code)
	}

	cfgFile := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("robot:" + secret))
	os.WriteFile(cfgFile, []byte(`{"auths":{"http://`+r.Host+`/v1/":{"auth":"`+auth+`"},"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`), 0o600)
	creds, err := LoadDockerConfig(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(creds.Registries(), []string{r.Host, "index.docker.io"}) {
		t.Fatalf("registries = %v", creds.Registries())
	}
	img, err := c.Ensure(context.Background(), ref, Pull{Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}

	// Cached now; still refused without credentials, and with wrong ones.
	before := r.TotalGets()
	if _, err := c.Ensure(context.Background(), ref, Pull{}); err == nil {
		t.Fatal("a caller without credentials got the cached private image")
	}
	if _, err := c.Ensure(context.Background(), r.Host+"/private/app@"+img.Digest, Pull{}); err == nil {
		t.Fatal("a caller without credentials got the cached private image by its digest")
	}
	wrong, _ := ParseDockerConfig([]byte(`{"auths":{"` + r.Host + `":{"username":"robot","password":"guess"}}}`))
	if _, err := c.Ensure(context.Background(), ref, Pull{Credentials: creds.Merge(wrong)}); err == nil {
		t.Fatal("a namespace's wrong credentials got the cached private image")
	} else if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "guess") {
		t.Fatalf("the error shows a secret: %v", err)
	}
	if again, err := c.Ensure(context.Background(), r.Host+"/private/app@"+img.Digest, Pull{Credentials: creds}); err != nil || again.Digest != img.Digest {
		t.Fatalf("with credentials again: %+v, %v", again, err)
	}
	if n := r.TotalGets() - before; n != 0 {
		t.Fatalf("%d blobs downloaded for a cached image", n)
	}

	for _, s := range []string{creds.String(), fmt.Sprintf("%v %+v %#v %s", creds, creds, creds, creds)} {
		if strings.Contains(s, secret) || strings.Contains(s, auth) || strings.Contains(s, `"p"`) {
			t.Fatalf("credentials print a secret: %s", s)
		}
	}

	if _, err := ParseDockerConfig([]byte(`{"credsStore":"desktop"}`)); err == nil || !strings.Contains(err.Error(), "credential helpers") {
		t.Fatalf("a config with a helper: %v", err)
	}
	if _, err := ParseDockerConfig([]byte(`{"auths":{"x":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}}`)); err == nil || strings.Contains(err.Error(), "nocolon") {
		t.Fatalf("a bad auth: %v", err)
	}
}

// TestLayersServeOnlyRepositoriesThatHaveThem: a layer cached from one
// repository is not given to an image of another unless that one's
// registry serves the layer too, so knowing a private image's manifest
// is not enough to read its layers.
func TestLayersServeOnlyRepositoriesThatHaveThem(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	shared := gzLayer(t, tarOf(t, file("private-data", "secret")))
	r.Push(t, "victim/app:1", imageSpec{}, shared)
	if _, err := c.Ensure(context.Background(), r.Host+"/victim/app:1", Pull{}); err != nil {
		t.Fatal(err)
	}
	first := layerDirs(t, c)

	// An attacker's repository names the same layer but cannot serve it.
	r.Push(t, "attacker/app:1", imageSpec{}, shared)
	r.Deny("attacker/app", shared.Digest)
	_, err := c.Ensure(context.Background(), r.Host+"/attacker/app:1", Pull{})
	if err == nil {
		t.Fatal("an image whose registry lacks the layer got it from the cache")
	}
	t.Logf("refused: %v", err)

	// Another repository that has it: downloaded to check, not unpacked
	// again.
	r.Push(t, "other/app:1", imageSpec{}, shared)
	img, err := c.Ensure(context.Background(), r.Host+"/other/app:1", Pull{})
	if err != nil {
		t.Fatal(err)
	}
	if g := r.Gets("other/app", shared.Digest); g != 1 {
		t.Fatalf("other/app's layer downloaded %d times, want once to check it", g)
	}
	if got := layerDirs(t, c); !slices.Equal(got, first) || !strings.Contains(img.Layers[0], first[0]) {
		t.Fatalf("layers = %v, want the one unpacked first (%v)", got, first)
	}
	// Known now: a second Ensure downloads nothing.
	before := r.TotalGets()
	if _, err := c.Ensure(context.Background(), r.Host+"/other/app:1", Pull{}); err != nil {
		t.Fatal(err)
	}
	if r.TotalGets() != before {
		t.Fatal("a layer checked before was downloaded again")
	}
}

func TestPlainHTTPOnlyToListedRegistries(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, nil, Options{})
	r.Push(t, "app:1", imageSpec{}, gzLayer(t, tarOf(t, file("f", "x"))))
	_, err := c.Ensure(context.Background(), r.Host+"/app:1", Pull{})
	if err == nil || !strings.Contains(err.Error(), "plain HTTP: not allowed") {
		t.Fatalf("a loopback registry not listed: %v", err)
	}
}

// TestUnsyncedLayersOfAnEarlierBootAreDropped: layers reach the disk by
// a background sync; one that had not when the host went down (its
// record says another boot, not synced) may have lost data and is
// dropped, while one of this boot (berth itself crashed) is kept and
// synced.
func TestUnsyncedLayersOfAnEarlierBootAreDropped(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id on this host")
	}
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	torn := gzLayer(t, tarOf(t, file("torn", "x")))
	kept := gzLayer(t, tarOf(t, file("kept", "y")))
	r.Push(t, "torn:1", imageSpec{}, torn)
	r.Push(t, "kept:1", imageSpec{}, kept)
	for _, ref := range []string{"torn:1", "kept:1"} {
		if _, err := c.Ensure(context.Background(), r.Host+"/"+ref, Pull{}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	rewrite := func(l testLayer, boot string) {
		p := filepath.Join(c.dir, layersDir, layerKey(l), layerFile)
		var rec layerRecord
		if err := readJSON(p, &rec); err != nil {
			t.Fatal(err)
		}
		if !rec.Synced || rec.Boot != bootID() {
			t.Fatalf("layer %s after Close: synced %v boot %q, want synced in this boot", l.Digest, rec.Synced, rec.Boot)
		}
		rec.Synced, rec.Boot = false, boot
		if err := writeJSON(p, &rec, true); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(torn, "an-earlier-boot")
	rewrite(kept, bootID())

	c2, err := Open(c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := layerDirs(t, c2); !slices.Equal(got, []string{layerKey(kept)}) {
		t.Fatalf("layers = %v, want only %s", got, layerKey(kept))
	}
	if list := c2.List(); len(list) != 1 || !strings.HasSuffix(list[0].Refs[0], "/kept:1") {
		t.Fatalf("images = %+v, want only kept:1", list)
	}
	c2.Close()
	var rec layerRecord
	readJSON(filepath.Join(c.dir, layersDir, layerKey(kept), layerFile), &rec)
	if !rec.Synced {
		t.Fatal("the kept layer was not synced by the reopened cache")
	}
}

// TestCacheFailuresHideItsPath: the cache's own failure reaches a client
// without the host path of berth's data.
func TestCacheFailuresHideItsPath(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	r.Push(t, "app:1", imageSpec{}, gzLayer(t, tarOf(t, file("f", "x"))))
	os.RemoveAll(filepath.Join(c.dir, tmpDir))
	os.WriteFile(filepath.Join(c.dir, tmpDir), nil, 0o600) // tmp is no directory: unpacking cannot start
	_, err := c.Ensure(context.Background(), r.Host+"/app:1", Pull{})
	if err == nil || strings.Contains(err.Error(), c.dir) || !strings.Contains(err.Error(), "<image cache>") {
		t.Fatalf("error = %v, want one without %s", err, c.dir)
	}
	if d := wire.DetailOf(err); d.Code != wire.CodeInternal {
		t.Fatalf("code = %s, want internal", d.Code)
	}
	t.Logf("error: %v", err)
}
