//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/wire"
)

// sparseTar is a tar holding one GNU sparse file of realSize bytes with
// a single 512-byte block of data at its end: a few hundred bytes that
// say "10 GB".
func sparseTar(t testing.TB, name string, realSize int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 512, Typeflag: tar.TypeReg, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	tw.Write(bytes.Repeat([]byte("x"), 512))
	tw.Close()
	b := buf.Bytes()
	h := b[:512]
	h[156] = tar.TypeGNUSparse
	octal := func(f []byte, v int64) { copy(f, fmt.Sprintf("%0*o", len(f), v)) }
	octal(h[386:398], realSize-512) // sparse[0].offset
	octal(h[398:410], 512)          // sparse[0].numbytes
	octal(h[483:495], realSize)     // realsize
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	// Check that Go's reader (the one berth uses) sees what a hostile
	// layer means.
	tr := tar.NewReader(bytes.NewReader(b))
	hdr, err := tr.Next()
	if err != nil || hdr.Size != realSize {
		t.Fatalf("sparse tar: %+v, %v", hdr, err)
	}
	return b
}

// fileSum is a host file's identity and content, to tell it untouched.
func fileSum(t testing.TB, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return "absent"
	}
	b, _ := os.ReadFile(p)
	return fmt.Sprintf("ino %d nlink %d mode %o uid %d mtime %d.%d sha %x", st.Ino, st.Nlink, st.Mode, st.Uid,
		st.Mtim.Sec, st.Mtim.Nsec, sha256.Sum256(b))
}

// TestHostileLayers pushes layers that try to leave the cache, reach host
// files or devices, or exhaust the disk, and checks each is refused with
// an error naming the image, layer and entry, or neutralised, and that
// nothing outside the cache changed.
func TestHostileLayers(t *testing.T) {
	r := newRegistry(t)
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	os.Mkdir(outside, 0o755)
	canary := filepath.Join(outside, "canary")
	os.WriteFile(canary, []byte("host data"), 0o644)
	c := openCache(t, r, Options{Dir: filepath.Join(top, "cache"), MaxImageEntries: 1000})
	// From a layer's root, <top>/cache/tmp/<name>/root, this is <top>.
	const up = "../../../../"

	watched := []string{canary, filepath.Join(outside, "evil"), filepath.Join(outside, "abs"), "/etc/shadow", "/etc/passwd",
		"/etc/berth-hostile", filepath.Join(top, "cache", "evil"), filepath.Join(top, "cache", "tmp", "evil")}
	before := map[string]string{}
	for _, p := range watched {
		before[p] = fileSum(t, p)
	}

	dev := ent{Header: tar.Header{Name: "dev/sda", Typeflag: tar.TypeBlock, Mode: 0o666, Devmajor: 8}}
	chr := ent{Header: tar.Header{Name: "dev/mem", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 1}}
	fifo := ent{Header: tar.Header{Name: "run/pipe", Typeflag: tar.TypeFifo, Mode: 0o666}}
	many := []ent{dir("many/")}
	for i := range 1500 {
		many = append(many, file(fmt.Sprintf("many/f%d", i), ""))
	}
	xattr := dir("opaque-by-xattr/")
	xattr.PAXRecords = map[string]string{"SCHILY.xattr.trusted.overlay.opaque": "y", "SCHILY.xattr.security.capability": "x"}
	bigID := file("far", "x")
	bigID.Uid, bigID.Gid = 1<<20, 70000

	type check func(t *testing.T, img Image)
	cases := []struct {
		name    string
		layer   func() testLayer
		entry   string // refused: the entry the error names
		reason  string // refused: what the error says
		checkOK check  // neutralised: what holds in the layer
	}{
		{name: "path traversal", entry: up + "outside/evil", reason: "climbs out of the layer",
			layer: func() testLayer { return gzLayer(t, tarOf(t, file(up+"outside/evil", "pwned"))) }},
		{name: "deep traversal to host etc", entry: strings.Repeat("../", 40) + "etc/berth-hostile", reason: "climbs out",
			layer: func() testLayer {
				return gzLayer(t, tarOf(t, file(strings.Repeat("../", 40)+"etc/berth-hostile", "pwned")))
			}},
		{name: "absolute path", layer: func() testLayer { return gzLayer(t, tarOf(t, file(outside+"/abs", "inside"))) },
			checkOK: func(t *testing.T, img Image) {
				b, err := os.ReadFile(filepath.Join(img.Layers[0], outside, "abs"))
				if err != nil || string(b) != "inside" {
					t.Fatalf("the absolute entry is not in the layer: %q, %v", b, err)
				}
			}},
		{name: "symlink to shadow then a file written through it",
			layer: func() testLayer {
				return gzLayer(t, tarOf(t, symlink("shadow", "/etc/shadow"), file("shadow", "pwned"),
					symlink("canary", canary), file("canary", "pwned")))
			},
			checkOK: func(t *testing.T, img Image) {
				for _, n := range []string{"shadow", "canary"} {
					fi, err := os.Lstat(filepath.Join(img.Layers[0], n))
					if err != nil || !fi.Mode().IsRegular() {
						t.Fatalf("%s in the layer: %v, %v; want the file that replaced the symlink", n, fi, err)
					}
				}
			}},
		{name: "file under a symlink to a host directory", entry: "etc/evil", reason: `"etc" is a symlink in this layer`,
			layer: func() testLayer { return gzLayer(t, tarOf(t, symlink("etc", outside), file("etc/evil", "pwned"))) }},
		{name: "file under a relative symlink climbing out", entry: "up/evil", reason: "is a symlink in this layer",
			layer: func() testLayer {
				return gzLayer(t, tarOf(t, symlink("up", up+"outside"), file("up/evil", "pwned")))
			}},
		{name: "hard link to a host file by absolute path", entry: "passwd", reason: `hard link to "/etc/passwd": "etc" is not in this layer`,
			layer: func() testLayer { return gzLayer(t, tarOf(t, hardlink("passwd", "/etc/passwd"))) }},
		{name: "hard link climbing out", entry: "canary", reason: "climbs out of the layer",
			layer: func() testLayer { return gzLayer(t, tarOf(t, hardlink("canary", up+"outside/canary"))) }},
		{name: "hard link through a symlink of the layer", entry: "x", reason: `"out" is a symlink in this layer`,
			layer: func() testLayer {
				return gzLayer(t, tarOf(t, symlink("out", outside), hardlink("x", "out/canary")))
			}},
		{name: "hard link to a directory", entry: "d2", reason: "only files may be linked",
			layer: func() testLayer { return gzLayer(t, tarOf(t, dir("d/"), hardlink("d2", "d"))) }},
		{name: "whiteout of the root", entry: ".wh.", reason: "whiteout of the layer's root",
			layer: func() testLayer { return gzLayer(t, tarOf(t, file(".wh.", ""))) }},
		{name: "whiteout of dot", entry: "./.wh..", reason: "whiteout of the layer's root",
			layer: func() testLayer { return gzLayer(t, tarOf(t, file("./.wh..", ""))) }},
		{name: "device nodes and a FIFO",
			layer: func() testLayer {
				return gzLayer(t, tarOf(t, dir("dev/"), dev, chr, fifo, hardlink("dev/mem2", "dev/mem")))
			},
			checkOK: func(t *testing.T, img Image) {
				for _, n := range []string{"dev/sda", "dev/mem", "dev/mem2", "run/pipe"} {
					if _, err := os.Lstat(filepath.Join(img.Layers[0], n)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s is in the layer (%v), want it skipped", n, err)
					}
				}
				for _, n := range []string{`"dev/sda": device node skipped`, `"run/pipe": FIFO skipped`} {
					if !slices.ContainsFunc(img.Notes, func(s string) bool { return strings.Contains(s, n) }) {
						t.Errorf("notes %q do not say %s", img.Notes, n)
					}
				}
			}},
		{name: "10 GB sparse file", entry: "sparse", reason: "declares 10737418240 bytes",
			layer: func() testLayer { return gzLayer(t, sparseTar(t, "sparse", 10<<30)) }},
		{name: "too many entries", entry: "many/f999", reason: "over 1000 entries",
			layer: func() testLayer { return gzLayer(t, tarOf(t, many...)) }},
		{name: "xattrs and far ids",
			layer: func() testLayer { return gzLayer(t, tarOf(t, xattr, bigID)) },
			checkOK: func(t *testing.T, img Image) {
				buf := make([]byte, 64)
				for _, x := range []string{"trusted.overlay.opaque", "security.capability"} {
					if _, err := unix.Lgetxattr(filepath.Join(img.Layers[0], "opaque-by-xattr"), x, buf); err == nil {
						t.Errorf("the layer's xattr %s was applied", x)
					}
				}
				var st syscall.Stat_t
				syscall.Lstat(filepath.Join(img.Layers[0], "far"), &st)
				if st.Uid != nobody || st.Gid != nobody {
					t.Errorf("far is %d:%d, want nobody's", st.Uid, st.Gid)
				}
			}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.layer()
			repo := fmt.Sprintf("hostile/case%d", i)
			r.Push(t, repo+":1", imageSpec{}, l)
			ref := r.Host + "/" + repo + ":1"
			img, err := c.Ensure(context.Background(), ref, Pull{})
			if tc.checkOK != nil {
				if err != nil {
					t.Fatalf("want it neutralised, got %v", err)
				}
				tc.checkOK(t, img)
				return
			}
			if err == nil {
				t.Fatalf("Ensure succeeded, want %q refused", tc.entry)
			}
			t.Logf("refused: %v", err)
			var le *LayerError
			if !errors.As(err, &le) || le.Image != ref || le.Layer != l.Digest || le.Entry != tc.entry ||
				!strings.Contains(le.Err.Error(), tc.reason) {
				t.Fatalf("error = %v (%#v), want one naming image %s, layer %s, entry %q: %s", err, le, ref, l.Digest, tc.entry, tc.reason)
			}
			for _, s := range []string{ref, l.Digest, tc.entry} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
			if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest {
				t.Errorf("code = %s, want bad_request", d.Code)
			}
			k, _ := key(l.Digest)
			if _, err := os.Stat(filepath.Join(c.dir, layersDir, k)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused layer is in the cache: %v", err)
			}
		})
	}
	for _, p := range watched {
		if after := fileSum(t, p); after != before[p] {
			t.Errorf("%s changed: %s -> %s", p, before[p], after)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(c.dir, tmpDir)); len(entries) != 0 {
		t.Errorf("tmp holds %d entries after the refusals", len(entries))
	}
	// Nothing but the cache's own directories at its top.
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if !slices.Contains([]string{layersDir, imagesDir, pinsDir, tmpDir, trashDir}, e.Name()) {
			t.Errorf("the cache's top has %q", e.Name())
		}
	}
}

// TestLayerNotMatchingItsDigest serves layers whose content differs from
// what the manifest and config say.
func TestLayerNotMatchingItsDigest(t *testing.T) {
	r := newRegistry(t)
	c := openCache(t, r, Options{})

	// The blob differs from its digest (one byte of a file's content, so
	// the tar stays valid and only the digest can tell).
	good := rawLayer(tarOf(t, file("a", "aaaa"), file("b", "bbbb")))
	r.Push(t, "corrupt:1", imageSpec{}, good)
	bad := bytes.Replace(good.Blob, []byte("bbbb"), []byte("bxbb"), 1)
	r.Replace(good.Digest, bad)
	ref := r.Host + "/corrupt:1"
	_, err := c.Ensure(context.Background(), ref, Pull{})
	var le *LayerError
	if !errors.As(err, &le) || le.Layer != good.Digest || !errors.Is(err, errDigest) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("corrupt blob: %v, want a layer error naming %s and %s and the digest", err, ref, good.Digest)
	}
	t.Logf("refused: %v", err)

	// A gzip blob cut short.
	gz := gzLayer(t, tarOf(t, file("c", randomBody(t, 100<<10))))
	r.Push(t, "short:1", imageSpec{}, gz)
	r.Replace(gz.Digest, gz.Blob[:len(gz.Blob)/2])
	_, err = c.Ensure(context.Background(), r.Host+"/short:1", Pull{})
	if !errors.As(err, &le) || le.Layer != gz.Digest || !errors.Is(err, errDigest) {
		t.Fatalf("short blob: %v", err)
	}
	t.Logf("refused: %v", err)

	// A config whose layers are not the manifest's.
	other := gzLayer(t, tarOf(t, file("d", "dddd")))
	r.Push(t, "diffid:1", imageSpec{DiffIDs: []string{other.DiffID, other.DiffID}}, other)
	_, err = c.Ensure(context.Background(), r.Host+"/diffid:1", Pull{})
	if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(err.Error(), "its manifest has 1 layers and its config 2") {
		t.Fatalf("layers of the config not the manifest's: %v", err)
	}
	t.Logf("refused: %v", err)

	entries, _ := os.ReadDir(filepath.Join(c.dir, layersDir))
	if len(entries) != 0 {
		t.Fatalf("the cache kept %d layers of refused images", len(entries))
	}
	if entries, _ := os.ReadDir(filepath.Join(c.dir, tmpDir)); len(entries) != 0 {
		t.Errorf("tmp holds %d entries after the refusals", len(entries))
	}
}
