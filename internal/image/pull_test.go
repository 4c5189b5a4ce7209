//go:build linux

package image

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func randomBody(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}

// TestPullRunsARealRootfs pulls an image of the host's bash and its
// libraries plus a layer of random files, watches the progress, and runs
// bash chrooted into the unpacked layer.
func TestPullRunsARealRootfs(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	owned := file("home/dev/notes", "mine")
	owned.Uid, owned.Gid = 1000, 1001
	suid := file("usr/bin/sudoish", "#!/bin/sh\n")
	suid.Mode = 0o4755
	rootfs := gzLayer(t, hostRootfs(t))
	data := gzLayer(t, tarOf(t, dir("home/"), dir("home/dev/"), owned, suid, file("data/a", randomBody(t, 3<<20)), file("data/b", randomBody(t, 2<<20))))
	cfg := Config{Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, WorkingDir: "/home/dev", User: "1000:1001",
		Entrypoint: []string{"/bin/bash"}, Cmd: []string{"-l"}}
	digest := r.Push(t, "tools/bash:1", imageSpec{Config: imagetest.Config(cfg)}, rootfs, data)

	var mu sync.Mutex
	var seen []Progress
	ref := r.Host + "/tools/bash:1"
	img, err := c.Ensure(context.Background(), ref, Pull{Progress: func(p Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != digest || img.Ref != ref || len(img.Layers) != 2 {
		t.Fatalf("image = %+v, want digest %s and 2 layers", img, digest)
	}
	if !slices.Equal(img.Config.Env, cfg.Env) || img.Config.WorkingDir != cfg.WorkingDir || img.Config.User != cfg.User ||
		!slices.Equal(img.Config.Entrypoint, cfg.Entrypoint) || !slices.Equal(img.Config.Cmd, cfg.Cmd) {
		t.Errorf("config = %+v, want %+v", img.Config, cfg)
	}

	// Progress: totals from the start, never going back, all done at the end.
	total := int64(len(rootfs.Blob) + len(data.Blob))
	if len(seen) < 3 {
		t.Fatalf("progress reports = %v, want at least a start, each layer", seen)
	}
	for i, p := range seen {
		if p.BytesTotal != total || p.LayersTotal != 2 || p.Ref != ref {
			t.Fatalf("report %d = %+v, want totals %d bytes, 2 layers", i, p, total)
		}
		if i > 0 && (p.BytesDone < seen[i-1].BytesDone || p.LayersDone < seen[i-1].LayersDone) {
			t.Fatalf("progress went back: %+v after %+v", p, seen[i-1])
		}
	}
	if last := seen[len(seen)-1]; last.BytesDone != total || last.LayersDone != 2 {
		t.Fatalf("last report = %+v, want all %d bytes and 2 layers done", last, total)
	}
	t.Logf("%d progress reports, last %+v", len(seen), seen[len(seen)-1])

	// The image's owners kept, setuid stripped.
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(img.Layers[1], "home/dev/notes"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 1000 || st.Gid != 1001 {
		t.Errorf("home/dev/notes is %d:%d, want the image's 1000:1001", st.Uid, st.Gid)
	}
	if err := syscall.Lstat(filepath.Join(img.Layers[1], "usr/bin/sudoish"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("usr/bin/sudoish mode = %o, want 755 (setuid stripped)", st.Mode&0o7777)
	}
	if !slices.ContainsFunc(img.Notes, func(n string) bool { return strings.Contains(n, "setuid") }) {
		t.Errorf("notes %q do not mention the stripped setuid bit", img.Notes)
	}

	// The rootfs layer is a root filesystem bash runs in.
	cmd := exec.Command("/bin/bash", "-c", `echo "hello from $(< /etc/hostname)"`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: img.Layers[0]}
	cmd.Env, cmd.Dir = []string{"PATH=/usr/bin:/bin"}, "/"
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello from image" {
		t.Fatalf("bash in the image: %v: %q", err, out)
	}

	// Again: the registry is asked (HEAD) but no blob is downloaded.
	before := r.TotalGets()
	seen = nil
	again, err := c.Ensure(context.Background(), ref, Pull{Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != digest || !slices.Equal(again.Layers, img.Layers) {
		t.Fatalf("second Ensure = %+v, want the cached %+v", again, img)
	}
	if n := r.TotalGets() - before; n != 0 {
		t.Fatalf("second Ensure downloaded %d blobs, want none", n)
	}
	if len(seen) != 1 || seen[0].LayersDone != 2 {
		t.Fatalf("progress of a cached image = %+v, want one report, all done", seen)
	}
	got, err := c.Lookup(digest)
	if err != nil || !slices.Equal(got.Layers, img.Layers) {
		t.Fatalf("Lookup(%s) = %+v, %v", digest, got, err)
	}
	list := c.List()
	if len(list) != 1 || list[0].Digest != digest || !slices.Contains(list[0].Refs, ref) || list[0].Size < 5<<20 {
		t.Fatalf("List() = %+v", list)
	}

	// A cache opened again over the same directory has it.
	c.Close()
	c2, err := Open(c.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	if got, err := c2.Lookup(digest); err != nil || !slices.Equal(got.Layers, img.Layers) {
		t.Fatalf("reopened Lookup = %+v, %v", got, err)
	}
}

func TestTagMovesAndShortNames(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	d1 := r.Push(t, "app:v", imageSpec{}, gzLayer(t, tarOf(t, file("v", "1"))))
	img, err := c.Ensure(context.Background(), r.Host+"/app:v", Pull{})
	if err != nil || img.Digest != d1 {
		t.Fatalf("Ensure = %+v, %v; want %s", img, err, d1)
	}
	d2 := r.Push(t, "app:v", imageSpec{}, gzLayer(t, tarOf(t, file("v", "2"))))
	img, err = c.Ensure(context.Background(), r.Host+"/app:v", Pull{})
	if err != nil || img.Digest != d2 {
		t.Fatalf("Ensure after the tag moved = %+v, %v; want %s", img, err, d2)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Layers[0], "v")); string(b) != "2" {
		t.Fatalf("v = %q, want 2", b)
	}
	// By digest: the same image, and a digest the registry does not have
	// is the registry's answer, a 400.
	if img, err := c.Ensure(context.Background(), r.Host+"/app@"+d1, Pull{}); err != nil || img.Digest != d1 {
		t.Fatalf("Ensure by digest = %+v, %v", img, err)
	}
	_, err = c.Ensure(context.Background(), r.Host+"/app:nope", Pull{})
	if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, r.Host+"/app:nope") {
		t.Fatalf("unknown tag: %v (%s), want a 400 naming it", err, d.Code)
	}
}

func TestMultiPlatformIndexPicksTheHost(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	host := r.Push(t, "multi:m-host", imageSpec{}, gzLayer(t, tarOf(t, file("arch", "host"))))
	other := "arm64"
	if goruntimeArch() == "arm64" {
		other = "amd64"
	}
	foreign := r.Push(t, "multi:m-other", imageSpec{Arch: other}, gzLayer(t, tarOf(t, file("arch", "other"))))
	index := r.PushIndex(t, "multi:1", map[string]string{goruntimeArch(): host, other: foreign})
	img, err := c.Ensure(context.Background(), r.Host+"/multi:1", Pull{})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != host {
		t.Fatalf("picked %s, want the host's manifest %s", img.Digest, host)
	}
	// The index digest finds it again, with or without the registry.
	if got, err := c.Lookup(index); err != nil || got.Digest != host {
		t.Fatalf("Lookup(index) = %+v, %v", got, err)
	}
	if got, err := c.Ensure(context.Background(), r.Host+"/multi@"+index, Pull{}); err != nil || got.Digest != host {
		t.Fatalf("Ensure(index digest) = %+v, %v", got, err)
	}
	// A single-platform image of another architecture is refused.
	_, err = c.Ensure(context.Background(), r.Host+"/multi:m-other", Pull{})
	if err == nil || !strings.Contains(err.Error(), "is for linux/"+other) {
		t.Fatalf("foreign image: %v", err)
	}
}

func TestConcurrentEnsuresPullOnce(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	l1 := gzLayer(t, tarOf(t, file("one", randomBody(t, 1<<20))))
	l2 := gzLayer(t, tarOf(t, file("two", randomBody(t, 1<<20))))
	// The same layer twice in one image, as empty layers often are.
	digest := r.Push(t, "busy:1", imageSpec{}, l1, l2, l1)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	imgs := make([]Image, n)
	for i := range n {
		wg.Go(func() {
			imgs[i], errs[i] = c.Ensure(context.Background(), r.Host+"/busy:1", Pull{})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || imgs[i].Digest != digest {
			t.Fatalf("Ensure %d = %+v, %v", i, imgs[i], errs[i])
		}
	}
	for _, l := range []testLayer{l1, l2} {
		if g := r.Gets("busy", l.Digest); g != 1 {
			t.Errorf("layer %s downloaded %d times by %d Ensures, want once", l.Digest, g, n)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(c.dir, tmpDir)); len(entries) != 0 {
		t.Errorf("tmp holds %d entries after the pulls", len(entries))
	}
}

func goruntimeArch() string { return goruntime.GOARCH }

// TestCanceledPullLeavesNothingAndAWaiterGoesOn: an Ensure canceled half
// way through a layer leaves no temporary files and no flight behind,
// and another Ensure that was waiting for that layer downloads it
// itself.
func TestCanceledPullLeavesNothingAndAWaiterGoesOn(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	l := gzLayer(t, tarOf(t, file("big", randomBody(t, 4<<20))))
	r.Push(t, "slow:1", imageSpec{}, l)
	stall := make(chan struct{})
	r.Stall(l.Digest, stall)
	ref := r.Host + "/slow:1"

	started := make(chan struct{})
	var once sync.Once
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, err := c.Ensure(ctxA, ref, Pull{Progress: func(p Progress) {
			if p.BytesDone > 0 {
				once.Do(func() { close(started) })
			}
		}})
		errA <- err
	}()
	<-started // A has half the layer

	// B waits on A's download, seeing its progress.
	progressB := make(chan Progress, 100)
	errB := make(chan error, 1)
	go func() {
		_, err := c.Ensure(context.Background(), ref, Pull{Progress: func(p Progress) {
			select {
			case progressB <- p:
			default:
			}
		}})
		errB <- err
	}()
	for p := range progressB {
		if p.BytesDone > 0 {
			break // B shares A's download
		}
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Ensure: %v", err)
	}
	close(stall) // B's own download is served whole
	if err := <-errB; err != nil {
		t.Fatalf("the waiting Ensure: %v", err)
	}
	if g := r.Gets("slow", l.Digest); g != 2 {
		t.Errorf("layer downloaded %d times, want 2 (A's canceled, B's own)", g)
	}
	c.mu.Lock()
	flights := len(c.flights)
	c.mu.Unlock()
	if flights != 0 {
		t.Errorf("%d flights left", flights)
	}
	if entries, _ := os.ReadDir(filepath.Join(c.dir, tmpDir)); len(entries) != 0 {
		t.Errorf("tmp holds %d entries", len(entries))
	}
}

// TestOpaqueRootDropsLowerLayers: a layer whose root is opaque replaces
// everything under it, so the layers below are not mounted at all.
func TestOpaqueRootDropsLowerLayers(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})
	base := gzLayer(t, tarOf(t, file("old", "x")))
	reset := gzLayer(t, tarOf(t, file(".wh..wh..opq", ""), file("new", "y")))
	top := gzLayer(t, tarOf(t, file("top", "z")))
	r.Push(t, "reset:1", imageSpec{}, base, reset, top)
	img, err := c.Ensure(context.Background(), r.Host+"/reset:1", Pull{})
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 2 || !strings.Contains(img.Layers[0], layerKey(reset)) || !strings.Contains(img.Layers[1], layerKey(top)) {
		t.Fatalf("layers = %v, want the opaque-root layer and the one above", img.Layers)
	}
}
