//go:build linux

package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image/imagetest"
)

// upperTree makes a directory shaped like an overlayfs upper directory a
// sandbox of id block base wrote: a new file in usr/local owned by the
// image's uid 1000, a whiteout of etc/old, an opaque opt, a setuid file
// and a hard link; and a workspace beside it.
func upperTree(t *testing.T, base int) (upper, ws string) {
	t.Helper()
	root := t.TempDir()
	upper, ws = filepath.Join(root, "upper"), filepath.Join(root, "workspace")
	for _, d := range []string{"usr/local/bin", "etc", "opt/new"} {
		os.MkdirAll(filepath.Join(upper, d), 0o755)
	}
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	write := func(p, body string, mode os.FileMode, uid int) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, base+uid, base+uid); err != nil {
			t.Fatal(err)
		}
		unix.Chmod(p, uint32(mode)) // after the chown, which clears setuid
	}
	write(filepath.Join(upper, "usr/local/bin/tool"), "#!/bin/sh\necho tool\n", 0o755, 1000)
	write(filepath.Join(upper, "usr/local/bin/suid"), "x", 0o4755, 0)
	write(filepath.Join(upper, "opt/new/file"), "new\n", 0o644, 0)
	write(filepath.Join(ws, "src/app.txt"), "app\n", 0o644, 0)
	if err := os.Link(filepath.Join(upper, "usr/local/bin/tool"), filepath.Join(upper, "usr/local/bin/tool2")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(upper, "etc/old"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(upper, "opt"), opaqueXattrTrusted, []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	for _, tree := range []string{upper, ws} {
		filepath.Walk(tree, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				err = os.Lchown(p, base, base)
			}
			return err
		})
	}
	return upper, ws
}

func openDir(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestAddBuildPushesAndPullsBack: an upper directory and a workspace
// become one layer over a pulled base; the image is pushed to the
// registry and kept under its local names, and a fresh cache that pulls
// it by digest gets the same image, with the whiteout and the opaque
// directory as overlayfs reads them and ownership mapped back.
func TestAddBuildPushesAndPullsBack(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t)
	base := gzLayer(t, tarOf(t, dir("etc/"), file("etc/old", "old\n"), file("etc/keep", "keep\n"), dir("opt/"), file("opt/lower", "lower\n")))
	r.Push(t, "base/os:1", imageSpec{Config: imagetest.Config(Config{Env: []string{"PATH=/bin", "FROM=base"}, WorkingDir: "/srv"})}, base)
	c := openCache(t, r, Options{})
	baseRef := r.Host + "/base/os:1"
	baseImg, err := c.Ensure(ctx, baseRef, Pull{Holder: "build-1"})
	if err != nil {
		t.Fatal(err)
	}

	const idBase = 1 << 24
	upper, ws := upperTree(t, idBase)
	lf, res, err := WriteLayerFile(ctx, filepath.Join(t.TempDir(), "layer.tar.gz"), []Tree{
		{Dir: openDir(t, upper), Upper: true, Skip: []string{"workspace"}},
		{Dir: openDir(t, ws), At: "workspace", Opaque: true},
	}, DiffLimits{IDBase: idBase, MaxEntries: 1000, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Notes, []string{"1 setuid/setgid bits stripped"}) {
		t.Errorf("notes %q, want only that the setuid bit was stripped", res.Notes)
	}
	built, err := c.AddBuild(ctx, Build{Base: baseRef, BaseDigest: baseImg.Digest, Layer: lf, Name: "app", Tag: "b1",
		Registry: r.Host + "/berth", Holder: "image.app", CreatedBy: "test build"})
	if err != nil {
		t.Fatal(err)
	}
	if built.Ref != r.Host+"/berth/app:b1" || !slices.Contains(built.Refs, "berth.local/app:latest") || len(built.Image.Layers) != 2 {
		t.Fatalf("built %+v", built)
	}
	if got := built.Image.Config; got.WorkingDir != "/srv" || !slices.Equal(got.Env, []string{"PATH=/bin", "FROM=base"}) {
		t.Fatalf("config %+v, want the base's", got)
	}
	local, err := c.LookupRef("berth.local/app:latest", "")
	if err != nil || local.Digest != built.Image.Digest {
		t.Fatalf("the local name: %+v %v", local, err)
	}
	if names := c.LocalNames(); !slices.Equal(names, []string{"app"}) {
		t.Fatalf("local names %v", names)
	}
	checkTop := func(c *Cache, img Image) {
		t.Helper()
		top := img.Layers[len(img.Layers)-1]
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(top, "usr/local/bin/tool"), &st); err != nil || st.Uid != 1000 || st.Nlink != 2 {
			t.Fatalf("tool in the layer: %+v %v, want uid 1000 and a hard link", st, err)
		}
		if err := unix.Lstat(filepath.Join(top, "usr/local/bin/suid"), &st); err != nil || st.Mode&unix.S_ISUID != 0 {
			t.Fatalf("suid in the layer: mode %o %v, want no setuid bit", st.Mode, err)
		}
		if err := unix.Lstat(filepath.Join(top, "etc/old"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Fatalf("etc/old in the layer: %+v %v, want a whiteout", st, err)
		}
		if v := make([]byte, 8); true {
			n, err := unix.Getxattr(filepath.Join(top, "opt"), opaqueXattrTrusted, v)
			if err != nil || string(v[:n]) != "y" {
				t.Fatalf("opt in the layer: opaque %q %v", v[:max(n, 0)], err)
			}
			n, err = unix.Getxattr(filepath.Join(top, "workspace"), opaqueXattrTrusted, v)
			if err != nil || string(v[:n]) != "y" {
				t.Fatalf("workspace in the layer: opaque %q %v", v[:max(n, 0)], err)
			}
		}
		if b, err := os.ReadFile(filepath.Join(top, "workspace/src/app.txt")); err != nil || string(b) != "app\n" {
			t.Fatalf("workspace file in the layer: %q %v", b, err)
		}
	}
	checkTop(c, built.Image)

	// Pulled back by digest into a fresh cache, and by tag.
	fresh := openCache(t, r, Options{})
	pulled, err := fresh.Ensure(ctx, r.Host+"/berth/app@"+built.Image.Digest, Pull{})
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Digest != built.Image.Digest || len(pulled.Layers) != 2 {
		t.Fatalf("pulled %+v, want digest %s", pulled, built.Image.Digest)
	}
	checkTop(fresh, pulled)
	if latest, err := fresh.Ensure(ctx, r.Host+"/berth/app:latest", Pull{}); err != nil || latest.Digest != built.Image.Digest {
		t.Fatalf("app:latest = %+v %v", latest, err)
	}

	// A second build on the first, kept locally only, takes latest.
	os.WriteFile(filepath.Join(upper, "usr/local/bin/v2"), []byte("2"), 0o644)
	lf2, _, err := WriteLayerFile(ctx, filepath.Join(t.TempDir(), "layer.tar.gz"), []Tree{{Dir: openDir(t, upper), Upper: true}},
		DiffLimits{IDBase: idBase, MaxEntries: 1000, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.AddBuild(ctx, Build{Base: "berth.local/app:b1", BaseDigest: built.Image.Digest, Layer: lf2, Name: "app", Tag: "b2",
		Holder: "image.app"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Ref != "berth.local/app:b2" || len(second.Image.Layers) != 3 {
		t.Fatalf("second build %+v", second)
	}
	if img, err := c.LookupRef("berth.local/app:latest", ""); err != nil || img.Digest != second.Image.Digest {
		t.Fatalf("latest after the second build: %+v %v", img, err)
	}
	if img, err := c.LookupRef("berth.local/app:b1", ""); err != nil || img.Digest != built.Image.Digest {
		t.Fatalf("b1 after the second build: %+v %v", img, err)
	}
	// Pushing a build on a local-only base is refused: its layers are in
	// no registry.
	_, err = c.AddBuild(ctx, Build{Base: "berth.local/app:b2", BaseDigest: second.Image.Digest, Layer: lf2, Name: "app", Tag: "b3",
		Registry: r.Host + "/berth"})
	if err == nil {
		t.Fatal("a build on a local-only base was pushed")
	}
	// No registry is asked for a local name.
	if _, err := c.Ensure(ctx, "berth.local/app:b2", Pull{}); err == nil {
		t.Fatal("Ensure of a local name asked a registry")
	}
}

// TestWriteDiffRefusesDevicesAndBounds: a FIFO, a device that is not a
// whiteout and trees past the bounds are refused, naming the entry.
func TestWriteDiffRefusesDevicesAndBounds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		make  func(dir string) error
		lim   DiffLimits
		upper bool
		want  string
	}{
		{"fifo", func(d string) error { return unix.Mkfifo(filepath.Join(d, "pipe"), 0o644) }, DiffLimits{MaxEntries: 10, MaxBytes: 10}, true, "/pipe is a FIFO"},
		{"whiteout outside an upper", func(d string) error { return unix.Mknod(filepath.Join(d, "dev"), unix.S_IFCHR, 0) },
			DiffLimits{MaxEntries: 10, MaxBytes: 10}, false, "/dev is a character device"},
		{"null device", func(d string) error {
			return unix.Mknod(filepath.Join(d, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
		},
			DiffLimits{MaxEntries: 10, MaxBytes: 10}, true, "/null is a character device"},
		{"redirected directory", func(d string) error {
			os.Mkdir(filepath.Join(d, "moved"), 0o755)
			return unix.Setxattr(filepath.Join(d, "moved"), overlayRedirect, []byte("/elsewhere"), 0)
		}, DiffLimits{MaxEntries: 10, MaxBytes: 10}, true, "/moved is a directory overlayfs renamed"},
		{"metacopy file", func(d string) error {
			os.WriteFile(filepath.Join(d, "meta"), nil, 0o644)
			return unix.Setxattr(filepath.Join(d, "meta"), overlayMetacopy, nil, 0)
		}, DiffLimits{MaxEntries: 10, MaxBytes: 10}, true, "/meta was copied up by overlayfs as metadata only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if err := tc.make(d); err != nil {
				t.Fatal(err)
			}
			_, _, err := WriteLayerFile(ctx, filepath.Join(t.TempDir(), "l"), []Tree{{Dir: openDir(t, d), Upper: tc.upper}}, tc.lim)
			var dr *DiffRefused
			if !errors.As(err, &dr) || !strings.HasPrefix(dr.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}
