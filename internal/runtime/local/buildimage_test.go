//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// buildTools are the programs the build tests' commands use.
var buildTools = []string{"mkdir", "rm", "ln", "chmod", "chown", "mkfifo", "mknod", "truncate", "cat", "cp", "stat", "printf", "readlink"}

// buildBase pushes the base image of the build tests: the host's bash and
// buildTools with their libraries, and files for a build to delete.
func buildBase(t *testing.T, reg *imagetest.Registry, repoTag string) string {
	t.Helper()
	ents := append(imagetest.HostRootfsEntries(t, buildTools...), imagetest.File("etc/doomed", "delete me\n"),
		imagetest.Dir("opt/"), imagetest.Dir("opt/olddir/"), imagetest.File("opt/olddir/old", "old\n"), imagetest.Dir("usr/local/"))
	reg.Push(t, repoTag, imagetest.ImageSpec{Config: imagetest.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "FROM_BASE=yes"}}},
		imagetest.GzLayer(t, imagetest.Tar(t, ents...)))
	return reg.Host + "/" + repoTag
}

// buildRuntime is an image runtime with opts' image options.
func buildRuntime(t *testing.T, dir string, reg *imagetest.Registry, opts local.Options) *local.Runtime {
	t.Helper()
	opts.DataDir, opts.AgentBinary, opts.PlainHTTPRegistries, opts.Logger = dir, agentBin, []string{reg.Host}, orchtest.Logger(t)
	return orchtest.NewRuntimeWith(t, opts)
}

// TestBuildOCIImage builds an image from a base image: commands install a
// program into /usr/local, delete a base file (a whiteout) and replace a
// base directory (opaque), files and the workspace go with it. A sandbox
// started from the image's bare name runs the program, misses what was
// deleted, and starts with the build's workspace; the build's env is not
// the image's. The build replaced the template of its name, and a
// template build of that name takes it back.
func TestBuildOCIImage(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	base := buildBase(t, reg, "build/base:1")
	dir := dataDir(t)
	r := buildRuntime(t, dir, reg, local.Options{})
	os.MkdirAll(filepath.Join(dir, "images", "app1"), 0o755) // a template the image replaces
	res, err := build(t, r, runtime.ImageBuild{
		ID: "build-app1", Name: "app1", Base: base,
		Files: []runtime.File{{Path: "src/app.txt", Content: "app\n"}},
		Env:   map[string]string{"GREETING": "hi"},
		Commands: []string{
			"mkdir -p /usr/local/bin && printf '#!/bin/bash\\necho hello from tool\\n' > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool",
			"rm /etc/doomed && rm -r /opt/olddir && mkdir /opt/olddir && echo new > /opt/olddir/new",
			"cp src/app.txt built.txt && echo $GREETING > env.txt",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != "berth.local/app1:build-app1" || !strings.Contains(res.Log, "image app1: berth.local/app1:build-app1 (sha256:") {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Lstat(filepath.Join(dir, "images", "app1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the template app1 is still there after the image app1 was built: %v", err)
	}
	if ids, _ := r.List(ctx); len(ids) != 0 {
		t.Fatalf("sandboxes left after the build: %v", ids)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "image-builds")); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
	// The name's latest build stays pinned across a restart of berth,
	// which releases only the pins of sandboxes that are gone.
	r.Close()
	r = buildRuntime(t, dir, reg, local.Options{})
	if _, err := os.Stat(filepath.Join(dir, "image-cache", "pins", "image.app1")); err != nil {
		t.Fatalf("the image app1 is not pinned after a restart: %v", err)
	}
	if name, err := r.CheckImage(ctx, "app1"); err != nil || name != "berth.local/app1:latest" {
		t.Fatalf("CheckImage(app1) = %q, %v", name, err)
	}
	imgs, err := r.ListImages(ctx)
	if err != nil || !slices.Contains(imgs.Named, "app1") {
		t.Fatalf("named images %+v %v, want app1 among them", imgs.Named, err)
	}
	for _, c := range imgs.Cached {
		if slices.Contains(c.Refs, res.Image) && c.Sandboxes != 0 {
			t.Fatalf("the built image counts %d sandboxes, none uses it", c.Sandboxes)
		}
	}

	for _, tag := range []string{"app1", res.Image} {
		id := "from-app1-" + strings.ToLower(strings.NewReplacer(".", "-", "/", "-", ":", "-").Replace(tag))
		if len(id) > 63 {
			id = id[:63]
		}
		ep := startImage(t, r, runtime.Spec{ServerID: id, ImageTag: tag, AgentToken: token})
		out := bash(t, ep, `tool; [[ -e /etc/doomed ]] && echo doomed-still-there; echo /opt/olddir/*; `+
			`cat /workspace/src/app.txt /workspace/built.txt /workspace/env.txt; echo "greeting=$GREETING base=$FROM_BASE"`)
		want := "hello from tool\n/opt/olddir/new\napp\napp\nhi\ngreeting= base=yes\n"
		if out.Stdout != want {
			t.Fatalf("a sandbox of %s sees:\n%s%s\nwant:\n%s", tag, out.Stdout, out.Stderr, want)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// A template build of the name takes it back.
	if _, err := build(t, r, runtime.ImageBuild{ID: "build-app1-tmpl", Name: "app1", Base: "host", Commands: []string{"echo t > t"}}); err != nil {
		t.Fatal(err)
	}
	if name, err := r.CheckImage(ctx, "app1"); err != nil || name != "app1" {
		t.Fatalf("CheckImage(app1) after a template build = %q, %v; want the template", name, err)
	}
}

// TestBuildOCIImagePushed: with a registry to push to, the build answers
// the registry's reference, which a berth with an empty cache (another
// host, or Kubernetes) starts by digest and by tag.
func TestBuildOCIImagePushed(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	base := buildBase(t, reg, "build/base:1")
	r := buildRuntime(t, dataDir(t), reg, local.Options{ImageRegistry: reg.Host + "/berth"})
	res, err := build(t, r, runtime.ImageBuild{ID: "build-pushed", Name: "pushed", Base: base,
		Commands: []string{"mkdir -p /usr/local/bin && printf '#!/bin/bash\\necho pushed tool\\n' > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool && rm /etc/doomed && echo ws > ws.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	want := reg.Host + "/berth/pushed:build-pushed"
	if res.Image != want {
		t.Fatalf("image %q, want %q", res.Image, want)
	}
	imgs, err := r.ListImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digest := ""
	for _, c := range imgs.Cached {
		if slices.Contains(c.Refs, want) {
			digest = c.Digest
		}
	}
	if digest == "" {
		t.Fatalf("the built image is not cached under %s: %+v", want, imgs.Cached)
	}

	// A fresh cache pulls it back by digest, and it is the same image.
	fresh, err := image.Open(image.Options{Dir: filepath.Join(t.TempDir(), "cache"), PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	pulled, err := fresh.Ensure(ctx, reg.Host+"/berth/pushed@"+digest, image.Pull{})
	if err != nil || pulled.Digest != digest {
		t.Fatalf("pull back by digest: %+v %v", pulled, err)
	}
	if latest, err := fresh.Ensure(ctx, reg.Host+"/berth/pushed:latest", image.Pull{}); err != nil || latest.Digest != digest {
		t.Fatalf("pull back pushed:latest: %+v %v", latest, err)
	}

	// Another berth, with nothing cached, starts it from the registry.
	other := buildRuntime(t, dataDir(t), reg, local.Options{})
	ep := startImage(t, other, runtime.Spec{ServerID: "pulled-built", ImageTag: reg.Host + "/berth/pushed@" + digest, AgentToken: token})
	if out := bash(t, ep, `tool; [[ -e /etc/doomed ]] || echo deleted; cat /workspace/ws.txt`).Stdout; out != "pushed tool\ndeleted\nws\n" {
		t.Fatalf("the pushed image started elsewhere: %q", out)
	}
}

// TestBuildOCIImageTakenOver: a build whose replica died left its sandbox
// (with half its work in the root) and its staging; the replica that
// takes it over (a new runtime on the data directory) builds again from
// the base, with nothing of the first attempt, and leaves nothing behind.
// Built again with the same id (its success was never recorded), the
// name and the build's tag move to the new image.
func TestBuildOCIImageTakenOver(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	base := buildBase(t, reg, "build/base:1")
	dir := dataDir(t)
	first := buildRuntime(t, dir, reg, local.Options{})
	ep := startImage(t, first, runtime.Spec{ServerID: "build-taken", ImageTag: base, AgentToken: token})
	if out := bash(t, ep, `echo half > /usr/local/leftover && echo half > /workspace/leftover && echo ok`).Stdout; out != "ok\n" {
		t.Fatalf("the first attempt's work: %q", out)
	}
	staging := filepath.Join(dir, "image-builds", "build-taken")
	os.MkdirAll(staging, 0o700)
	os.WriteFile(filepath.Join(staging, "layer.tar.gz"), []byte("half a layer"), 0o600)
	first.Close()

	second := buildRuntime(t, dir, reg, local.Options{})
	b := runtime.ImageBuild{ID: "build-taken", Name: "taken", Base: base, Commands: []string{"echo done > /usr/local/done"}}
	res, err := build(t, second, b)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) string {
		t.Helper()
		ep := startImage(t, second, runtime.Spec{ServerID: "check-taken", ImageTag: "taken", AgentToken: token})
		out := bash(t, ep, `shopt -s nullglob; cat /usr/local/done; echo /usr/local/* /workspace/*`).Stdout
		if out != "done\n/usr/local/done\n" {
			t.Fatalf("%s: the image of the taken-over build has %q; want only done", what, out)
		}
		second.Delete(ctx, "check-taken")
		if ids, _ := second.List(ctx); len(ids) != 0 {
			t.Fatalf("%s: sandboxes left: %v", what, ids)
		}
		if _, err := os.Lstat(staging); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: staging left: %v", what, err)
		}
		name, _ := second.CheckImage(ctx, "taken")
		digest := ""
		imgs, _ := second.ListImages(ctx)
		for _, c := range imgs.Cached {
			if slices.Contains(c.Refs, name) {
				digest = c.Digest
				if !slices.Contains(c.Refs, res.Image) {
					t.Fatalf("%s: the build's tag %s is not on the latest image: %v", what, res.Image, c.Refs)
				}
			}
		}
		return digest
	}
	d1 := check("taken over")
	if _, err := build(t, second, b); err != nil {
		t.Fatal(err)
	}
	if d2 := check("built again"); d2 == d1 || d2 == "" {
		t.Fatalf("built again with the same id: image %s, first %s; want a new one named taken", d2, d1)
	}
}

// TestBuildOCIImageHostileUpper: what a build sandbox plants in its root
// and workspace. Symlinks to host files and berth's key stay symlinks
// and nothing they point to is read; a setuid file loses the bit; hard
// links stay links within the layer; ownership maps back to the image's
// ids. FIFOs and device nodes, a sparse file past the limit, more entries
// than an image may have and a tree nested too deep fail the build,
// naming what is wrong, and leave no image.
func TestBuildOCIImageHostileUpper(t *testing.T) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "server.key")
	secretContent := []byte("berth-server-key-" + randomHex(t))
	if err := os.WriteFile(secret, secretContent, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := imagetest.NewRegistry(t)
	base := buildBase(t, reg, "build/base:1")
	dir := dataDir(t)
	r := buildRuntime(t, dir, reg, local.Options{HidePaths: []string{secret}, ImageMaxEntries: 2000})

	res, err := build(t, r, runtime.ImageBuild{ID: "build-links", Name: "links", Base: base, Commands: []string{
		"ln -s /etc/shadow /usr/local/shadow && ln -s " + secret + " /usr/local/key && ln -s " + dir + " /usr/local/data && ln -s / /usr/local/root",
		"rm -r /opt && ln -s /etc /opt && ln -s ../../../../../../etc/passwd /workspace/up",
		"cp /bin/bash /usr/local/suid && chmod 4755 /usr/local/suid && mkdir /usr/local/sgid && chmod 2755 /usr/local/sgid",
		"echo linked > /usr/local/a && ln /usr/local/a /usr/local/b && echo mine > /usr/local/owned && chown 1234:4321 /usr/local/owned",
	}})
	if err != nil {
		t.Fatal(err)
	}
	layer := topLayer(t, r, res.Image)
	for name, want := range map[string]string{"usr/local/shadow": "/etc/shadow", "usr/local/key": secret, "usr/local/data": dir,
		"usr/local/root": "/", "opt": "/etc", "workspace/up": "../../../../../../etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(layer, name)); err != nil || got != want {
			t.Errorf("%s in the layer: %q %v, want a symlink to %s", name, got, err, want)
		}
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	filepath.WalkDir(layer, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, secretContent) || (len(shadow) > 0 && bytes.Equal(b, shadow)) {
				t.Errorf("berth read a host file into the layer at %s", p)
			}
		}
		return nil
	})
	var st, st2 unix.Stat_t
	if err := unix.Lstat(filepath.Join(layer, "usr/local/suid"), &st); err != nil || st.Mode&0o7777 != 0o755 {
		t.Errorf("the setuid file in the layer: mode %o %v, want 0755", st.Mode&0o7777, err)
	}
	if err := unix.Lstat(filepath.Join(layer, "usr/local/sgid"), &st); err != nil || st.Mode&0o7777 != 0o2755 {
		t.Errorf("the setgid directory in the layer: mode %o %v, want 02755 (setgid only picks new files' group)", st.Mode&0o7777, err)
	}
	unix.Lstat(filepath.Join(layer, "usr/local/a"), &st)
	unix.Lstat(filepath.Join(layer, "usr/local/b"), &st2)
	if st.Ino != st2.Ino || st.Nlink != 2 {
		t.Errorf("hard links in the layer: inodes %d and %d, %d links; want one file", st.Ino, st2.Ino, st.Nlink)
	}
	if err := unix.Lstat(filepath.Join(layer, "usr/local/owned"), &st); err != nil || st.Uid != 1234 || st.Gid != 4321 {
		t.Errorf("owned in the layer: %d:%d %v, want the image's 1234:4321", st.Uid, st.Gid, err)
	}
	if err := unix.Lstat(filepath.Join(layer, "usr/local/a"), &st); err != nil || st.Uid != 0 {
		t.Errorf("a file of the sandbox's root in the layer: uid %d %v, want 0", st.Uid, err)
	}

	// A sandbox of the image gets its /workspace: the symlink copied as
	// a symlink, nothing of the host's behind it.
	ep := startImage(t, r, runtime.Spec{ServerID: "from-links", ImageTag: "links", AgentToken: token})
	if out := bash(t, ep, `echo "$(readlink /workspace/up)"; [[ -L /opt ]] && echo opt-link`).Stdout; out != "../../../../../../etc/passwd\nopt-link\n" {
		t.Fatalf("a sandbox of the image sees %q", out)
	}
	if got, err := os.Readlink(filepath.Join(dir, "servers", "from-links", "volume", "workspace", "up")); err != nil || got != "../../../../../../etc/passwd" {
		t.Fatalf("the seeded workspace's up: %q %v, want the symlink", got, err)
	}

	for _, tc := range []struct{ name, command, want string }{
		{"fifo", "mkfifo /usr/local/pipe", "/usr/local/pipe is a FIFO"},
		{"workspace-fifo", "mkdir sub && mkfifo sub/pipe", "/workspace/sub/pipe is a FIFO"},
		{"device", "mknod /workspace/dev c 0 0", "/workspace/dev is a character device"},
		{"sparse", "truncate -s 10G /usr/local/sparse", "/usr/local/sparse: the image's new files add up to over"},
		{"entries", "mkdir /usr/local/many && for i in {1..2500}; do : > /usr/local/many/f$i; done", "more than"},
		{"deep", "d=/usr/local; for i in {1..300}; do d=$d/d; done; mkdir -p $d", "nested more than 256 directories deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, r, runtime.ImageBuild{ID: "build-" + tc.name, Name: tc.name, Base: base, Commands: []string{tc.command}})
			var f *runtime.BuildFailed
			if errors.As(err, &f) {
				t.Logf("reason: %s", f.Reason)
			}
			if !errors.As(err, &f) || !strings.Contains(f.Reason, tc.want) {
				t.Fatalf("build planting %s: %v, want it failed saying %q", tc.name, err, tc.want)
			}
			if slices.Contains(cachedRefs(t, r), "berth.local/"+tc.name+":latest") {
				t.Fatalf("a refused build made image %s", tc.name)
			}
		})
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "image-builds")); len(left) != 0 {
		t.Fatalf("staging left: %v", left)
	}
}

// cachedRefs are every reference of the runtime's cached images.
func cachedRefs(t *testing.T, r *local.Runtime) []string {
	t.Helper()
	imgs, err := r.ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, c := range imgs.Cached {
		refs = append(refs, c.Refs...)
	}
	return refs
}

// topLayer is the directory of the top layer of the cached image ref.
func topLayer(t *testing.T, r *local.Runtime, ref string) string {
	t.Helper()
	imgs, err := r.ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range imgs.Cached {
		if slices.Contains(ci.Refs, ref) {
			return local.TopLayer(r, ci.Digest)
		}
	}
	t.Fatalf("no cached image %s", ref)
	return ""
}
