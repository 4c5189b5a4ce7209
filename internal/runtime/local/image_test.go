//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

// imageRuntime is a fully isolating runtime that pulls from reg over
// plain HTTP.
func imageRuntime(t testing.TB, dir string, reg *imagetest.Registry) *local.Runtime {
	t.Helper()
	return orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, PlainHTTPRegistries: []string{reg.Host},
		Logger: orchtest.Logger(t)})
}

// bashImage pushes an image of the host's bash and its libraries, with
// a marker file and the given config, and returns its reference.
func bashImage(t *testing.T, reg *imagetest.Registry, repoTag string, cfg imagetest.Config, extra ...imagetest.Entry) string {
	t.Helper()
	ents := append(imagetest.HostRootfsEntries(t, "mkdir"), imagetest.File("etc/image-marker", repoTag+"\n"), imagetest.Dir("opt/"),
		imagetest.Dir("usr/local/"))
	ents = append(ents, extra...)
	reg.Push(t, repoTag, imagetest.ImageSpec{Config: cfg}, imagetest.GzLayer(t, imagetest.Tar(t, ents...)))
	return reg.Host + "/" + repoTag
}

func startImage(t *testing.T, r *local.Runtime, spec runtime.Spec) runtime.Endpoint {
	t.Helper()
	if err := r.Create(context.Background(), spec); err != nil {
		t.Fatalf("create %s from %s: %v", spec.ServerID, spec.ImageTag, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := r.WaitReady(ctx, spec.ServerID)
	if err != nil {
		logs, _ := r.Logs(context.Background(), spec.ServerID, 20)
		t.Fatalf("%s not ready: %v\n%s", spec.ServerID, err, logs)
	}
	return ep
}

// TestImageSandbox starts a sandbox from an OCI image: its root is the
// image (bash and libraries from the image, nothing of the host's), the
// image's Env is set under the caller's, what the sandbox writes into
// the system (/usr/local, /opt) lands on its own volume, counts against
// it, survives the agent's death and restart, and leaves the cached
// layers as they were.
func TestImageSandbox(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	ref := bashImage(t, reg, "test/bash:1", imagetest.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "FROM_IMAGE=yes", "OVERRIDE=image"}})
	dir := dataDir(t)
	r := imageRuntime(t, dir, reg)

	for tag, want := range map[string]string{ref: ref, "python:3.12": "docker.io/library/python:3.12", "host": "host", "base": "base"} {
		if name, err := r.CheckImage(ctx, tag); err != nil || name != want {
			t.Fatalf("CheckImage(%s) = %q, %v; want %q", tag, name, err, want)
		}
	}
	spec := runtime.Spec{ServerID: "img-1", ImageTag: ref, AgentToken: token, Env: map[string]string{"OVERRIDE": "caller"}}
	ep := startImage(t, r, spec)

	// The root is the image's overlay: the image's marker, none of the
	// host's programs.
	res := bash(t, ep, `echo "$(</etc/image-marker)"; [[ -e /usr/bin/ls || -e /bin/ls ]] && echo host-ls; `+
		`while read -r _ _ _ root mnt _ _ fstype _; do [[ $mnt == / ]] && echo "root $fstype"; done < /proc/self/mountinfo; `+
		`echo "$FROM_IMAGE $OVERRIDE $PATH"; pwd`)
	if res.ExitCode != 0 {
		t.Fatalf("bash in the image: %+v", res)
	}
	want := "test/bash:1\nroot overlay\nyes caller /usr/local/bin:/usr/bin:/bin\n/workspace\n"
	if res.Stdout != want {
		t.Fatalf("in the image sandbox:\n%s\nwant:\n%s", res.Stdout, want)
	}
	noHostPaths(t, ep, dir)
	if kernelAtLeast(t, 6, 15) && local.OverlayByPath(r) {
		t.Fatal("on Linux 6.15 or later the image's overlay was mounted by path, not made from descriptors")
	}

	// Installing into the system: files in /usr/local and /opt.
	vol := filepath.Join(dir, "servers", "img-1", "volume")
	before := volumeUsed(t, vol)
	res = bash(t, ep, `mkdir -p /opt/tool/bin && echo installed > /opt/tool/bin/marker && printf '%*s' 8388608 '' > /usr/local/blob && echo ok`)
	if res.Stdout != "ok\n" {
		t.Fatalf("install into the image's root: %+v", res)
	}
	if used := volumeUsed(t, vol); used-before < 8<<20 {
		t.Fatalf("the volume's use grew by %d bytes for an 8 MiB file in /usr/local; want it on the volume", used-before)
	}
	for _, l := range layerDirs(t, dir) {
		if _, err := os.Lstat(filepath.Join(l, "opt/tool")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the cached layer %s has opt/tool: %v", l, err)
		}
	}

	// The agent dies (its whole sandbox with it); the sandbox is made
	// again with what it installed.
	pid, _ := r.Pid("img-1")
	syscall.Kill(pid, syscall.SIGKILL)
	waitFailed(t, r, "img-1")
	ep = startImage(t, r, spec)
	res = bash(t, ep, `echo "$(</opt/tool/bin/marker)"; [[ -s /usr/local/blob ]] && echo blob`)
	if res.Stdout != "installed\nblob\n" {
		t.Fatalf("after the agent's restart: %+v", res)
	}

	imgs, err := r.ListImages(ctx)
	if err != nil || len(imgs.Cached) != 1 || imgs.Cached[0].Sandboxes != 1 || imgs.Cached[0].Refs[0] != ref || imgs.CacheBytes <= 0 ||
		imgs.CacheLimit <= imgs.CacheBytes || !slices.Equal(imgs.Named, []string{"host", "base"}) {
		t.Fatalf("images with the sandbox: %+v, %v", imgs, err)
	}
	if err := r.Delete(ctx, "img-1"); err != nil {
		t.Fatal(err)
	}
	if imgs, _ = r.ListImages(ctx); imgs.Cached[0].Sandboxes != 0 {
		t.Fatalf("images after the delete: %+v; want the image released", imgs)
	}
}

// waitFailed waits until the runtime has seen the sandbox's processes
// end.
func waitFailed(t *testing.T, r *local.Runtime, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := r.Status(context.Background(), id)
		if st.State == runtime.StateFailed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s after its kill: %+v", id, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// volumeUsed is the bytes in use on the filesystem mounted at dir.
func volumeUsed(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// layerDirs are the unpacked layers of the image cache in dir.
func layerDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "image-cache", "layers", "*", "root"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no unpacked layers in the image cache: %v", err)
	}
	return m
}

// TestImageConfig: the image's WorkingDir is where commands start and
// its USER whom they run as, unless the command names another; the
// workspace is that user's. An image with no WorkingDir starts commands
// in the workspace.
func TestImageConfig(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	ref := bashImage(t, reg, "test/app:1", imagetest.Config{WorkingDir: "/srv/app", User: "app"},
		imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1000::/home/app:/bin/bash\n"),
		imagetest.File("etc/group", "root:x:0:\napp:x:1000:\n"),
		imagetest.Dir("srv/"), imagetest.Dir("srv/app/"), imagetest.File("srv/app/README", "the app\n"))
	r := imageRuntime(t, dataDir(t), reg)
	ep := startImage(t, r, runtime.Spec{ServerID: "cfg-1", ImageTag: ref, AgentToken: token})
	res := bash(t, ep, `pwd; echo "$EUID $HOME"; echo "$(<README)"`)
	if res.Stdout != "/srv/app\n1000 /home/app\nthe app\n" {
		t.Fatalf("a command in an image with WORKDIR /srv/app and USER app: %+v", res)
	}
	res = bashAs(t, ep, "root", `echo "$EUID"`)
	if res.Stdout != "0\n" {
		t.Fatalf("a command as root in it: %+v", res)
	}
	res = bash(t, ep, `cd /workspace && echo mine > file && echo "$(<file)"`)
	if res.Stdout != "mine\n" {
		t.Fatalf("the image's user writing its workspace: %+v", res)
	}

	numeric := bashImage(t, reg, "test/numeric:1", imagetest.Config{User: "4242:4343"})
	ep = startImage(t, r, runtime.Spec{ServerID: "cfg-2", ImageTag: numeric, AgentToken: token})
	res = bash(t, ep, `pwd; echo "$EUID"; echo x > f && echo ok`)
	if res.Stdout != "/workspace\n4242\nok\n" {
		t.Fatalf("a command in an image with USER 4242:4343 (in no passwd): %+v", res)
	}
}

// TestImageFailures: a start from an image that cannot be had fails with
// the reason, naming the image, and leaves no sandbox behind to start
// empty.
func TestImageFailures(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	bashImage(t, reg, "private/app:1", imagetest.Config{})
	reg.RequireUser("private/", "robot:secret")
	hostile := reg.Host + "/hostile/escape:1"
	reg.Push(t, "hostile/escape:1", imagetest.ImageSpec{}, imagetest.GzLayer(t, imagetest.Tar(t, imagetest.File("../../escaped", "x"))))
	r := imageRuntime(t, dataDir(t), reg)

	for _, tc := range []struct{ name, ref, want string }{
		{"unknown image", reg.Host + "/no/such:1", "no such image"},
		{"registry refusal", reg.Host + "/private/app:1", "will not give it anonymously"},
		{"hostile image", hostile, "escaped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Create(ctx, runtime.Spec{ServerID: "fail-1", ImageTag: tc.ref, AgentToken: token})
			d := wire.DetailOf(err)
			if err == nil || d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, tc.ref) || !strings.Contains(d.Message, tc.want) {
				t.Fatalf("Create from %s: %v (%s); want a bad request naming it and saying %q", tc.ref, err, d.Code, tc.want)
			}
			t.Logf("refused: %v", err)
			if err := r.Delete(ctx, "fail-1"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := r.CheckImage(ctx, "Not A/Reference"); !isUnknown(err) {
		t.Fatalf("CheckImage of an invalid reference: %v, want an unknown image", err)
	}
}

func isUnknown(err error) bool {
	var u *runtime.UnknownImage
	return errors.As(err, &u)
}

// TestImageDpkgInstall installs a package the way apt-get does, with
// dpkg, from a .deb uploaded into the sandbox: the image's dpkg writes
// its files and database into the image's root, and both survive the
// agent's death and restart.
func TestImageDpkgInstall(t *testing.T) {
	for _, p := range []string{"dpkg", "dpkg-deb"} {
		if systemProgram(p) == "" {
			t.Skipf("no %s on this host to build the image and the package with", p)
		}
	}
	// The package: one program in /usr/bin.
	pkg := t.TempDir()
	for name, body := range map[string]string{
		"DEBIAN/control":      "Package: berth-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: berth <berth@example.com>\nDescription: a test package\n",
		"usr/bin/berth-hello": "#!/bin/bash\necho hello from a package\n",
	} {
		p := filepath.Join(pkg, "root", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(pkg, "berth-hello.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", filepath.Join(pkg, "root"), deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
	debBytes, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}

	// The image: the host's bash, dpkg and what dpkg runs, and an empty
	// package database.
	var progs []string
	for _, p := range []string{"dpkg", "dpkg-deb", "dpkg-split", "dpkg-query", "ldconfig", "start-stop-daemon", "tar", "rm", "sh", "diff"} {
		if path := systemProgram(p); path != "" {
			progs = append(progs, path)
		}
	}
	ents := append(imagetest.HostRootfsEntries(t), imagetest.HostFiles(t, progs...)...)
	for _, d := range []string{"var/", "var/lib/", "var/lib/dpkg/", "var/lib/dpkg/info/", "var/lib/dpkg/updates/", "var/lib/dpkg/triggers/",
		"var/log/", "etc/dpkg/", "etc/dpkg/dpkg.cfg.d/", "usr/bin/", "usr/share/"} {
		ents = append(ents, imagetest.Dir(d))
	}
	ents = append(ents, imagetest.File("var/lib/dpkg/status", ""), imagetest.File("var/lib/dpkg/available", ""))
	reg := imagetest.NewRegistry(t)
	reg.Push(t, "test/dpkg:1", imagetest.ImageSpec{Config: imagetest.Config{Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}},
		imagetest.GzLayer(t, imagetest.Tar(t, imagetest.Unique(ents)...)))
	ref := reg.Host + "/test/dpkg:1"
	r := imageRuntime(t, dataDir(t), reg)
	spec := runtime.Spec{ServerID: "dpkg-1", ImageTag: ref, AgentToken: token}
	ep := startImage(t, r, spec)

	// Uploaded through bash alone (the image has no base64): printf
	// writes the bytes from escapes.
	var esc strings.Builder
	for _, c := range debBytes {
		fmt.Fprintf(&esc, `\x%02x`, c)
	}
	res := bash(t, ep, `printf '`+esc.String()+`' > /workspace/berth-hello.deb && dpkg -i /workspace/berth-hello.deb && berth-hello`)
	if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "hello from a package\n") {
		t.Fatalf("dpkg -i in the image's sandbox: %+v", res)
	}
	pid, _ := r.Pid("dpkg-1")
	syscall.Kill(pid, syscall.SIGKILL)
	waitFailed(t, r, "dpkg-1")
	ep = startImage(t, r, spec)
	res = bash(t, ep, `berth-hello && dpkg -s berth-hello | while read -r k v; do [[ $k == Status: ]] && echo "$v"; done`)
	if res.Stdout != "hello from a package\ninstall ok installed\n" {
		t.Fatalf("after the agent's restart: %+v", res)
	}
}

// TestImageSandboxAdopted: a runtime started on the data directory of
// another adopts its image sandboxes (still running their image) and
// makes the cache's pins match them: a sandbox's pin lost is pinned
// again, the pin of a sandbox that is gone is released.
func TestImageSandboxAdopted(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	ref := bashImage(t, reg, "test/adopt:1", imagetest.Config{})
	dir := dataDir(t)
	first, err := local.New(local.Options{DataDir: dir, AgentBinary: agentBin, Isolation: local.IsolationFull,
		Limits: local.Limits{DiskBytes: orchtest.SandboxDisk}, PlainHTTPRegistries: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	spec := runtime.Spec{ServerID: "adopt-1", ImageTag: ref, AgentToken: token}
	startImage(t, first, spec)
	first.Close()
	pins := filepath.Join(dir, "image-cache", "pins")
	if err := os.Remove(filepath.Join(pins, "adopt-1")); err != nil {
		t.Fatalf("the sandbox's pin: %v", err)
	}
	if err := os.WriteFile(filepath.Join(pins, "gone-1"), []byte(imageDigest(t, dir)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	second := imageRuntime(t, dir, reg)
	ctxw, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ep, err := second.WaitReady(ctxw, "adopt-1")
	if err != nil {
		t.Fatal(err)
	}
	if res := bash(t, ep, `echo "$(</etc/image-marker)"`); res.Stdout != "test/adopt:1\n" {
		t.Fatalf("the adopted sandbox: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(pins, "adopt-1")); err != nil {
		t.Fatalf("the adopted sandbox's image is not pinned again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pins, "gone-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the pin of a sandbox that is gone was kept: %v", err)
	}
	if imgs, err := second.ListImages(ctx); err != nil || len(imgs.Cached) != 1 || imgs.Cached[0].Sandboxes != 1 {
		t.Fatalf("images after the adoption: %+v, %v", imgs, err)
	}
}

// imageDigest is the digest of the one image cached in dir.
func imageDigest(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "image-cache", "images", "*.json"))
	if len(m) != 1 {
		t.Fatalf("want one cached image, have %v", m)
	}
	return "sha256:" + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "sha256-"), ".json")
}

// TestImageNeedsIsolation: without isolation a sandbox cannot mount an
// image, so a reference is refused up front, saying why; host still
// starts.
func TestImageNeedsIsolation(t *testing.T) {
	ctx := context.Background()
	r, err := local.New(local.Options{DataDir: dataDir(t), AgentBinary: agentBin, Isolation: local.IsolationNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	_, err = r.CheckImage(ctx, "python:3.12")
	if !isUnknown(err) || !strings.Contains(err.Error(), "full isolation") || !strings.Contains(err.Error(), "host") {
		t.Fatalf("CheckImage of a reference without isolation: %v; want an unknown image saying it needs full isolation", err)
	}
	err = r.Create(ctx, runtime.Spec{ServerID: "plain-1", ImageTag: "python:3.12", AgentToken: token})
	if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "full isolation") {
		t.Fatalf("Create from a reference without isolation: %v", err)
	}
	r.Delete(ctx, "plain-1")
	if name, err := r.CheckImage(ctx, "host"); err != nil || name != "host" {
		t.Fatalf("CheckImage(host) without isolation: %q, %v", name, err)
	}
}

// TestImageSandboxOverlayByPath: on kernels before 6.15 the image's
// overlay is mounted with its layers by path, in a mount namespace of
// its own; forced here, the sandbox's root is the same (the image's
// files over a writable upper on the volume), berth's own mount
// namespace keeps none of it, and what the sandbox installs survives its
// agent's restart.
func TestImageSandboxOverlayByPath(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	ref := bashImage(t, reg, "test/bypath:1", imagetest.Config{}, imagetest.Dir("usr/share/"),
		imagetest.File("usr/share/lower", "from the image\n"))
	dir := dataDir(t)
	r := imageRuntime(t, dir, reg)
	local.ForceOverlayByPath(r)
	spec := runtime.Spec{ServerID: "bypath-1", ImageTag: ref, AgentToken: token}
	ep := startImage(t, r, spec)
	res := bash(t, ep, `echo "$(</etc/image-marker)"; echo "$(</usr/share/lower)"; `+
		`while read -r _ _ _ root mnt _ _ fstype _; do [[ $mnt == / ]] && echo "root $fstype"; done < /proc/self/mountinfo; `+
		`echo installed > /usr/share/upper && echo ok`)
	if res.Stdout != "test/bypath:1\nfrom the image\nroot overlay\nok\n" {
		t.Fatalf("in a sandbox whose overlay was mounted by path: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "servers", "bypath-1", "volume", "root", "upper", "usr", "share", "upper")); err != nil || string(b) != "installed\n" {
		t.Fatalf("the sandbox's write in its upper on the volume: %q, %v", b, err)
	}
	noHostPaths(t, ep, dir)
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mi), "lowerdir=/tmp/l") {
		t.Fatalf("berth's mount namespace shows the sandbox's overlay: %v\n%s", err, mi)
	}
	pid, _ := r.Pid("bypath-1")
	syscall.Kill(pid, syscall.SIGKILL)
	waitFailed(t, r, "bypath-1")
	ep = startImage(t, r, spec)
	if res := bash(t, ep, `echo "$(</usr/share/upper)"`); res.Stdout != "installed\n" {
		t.Fatalf("after the agent's restart: %+v", res)
	}
}

// kernelAtLeast says whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}

// noHostPaths fails the test when the sandbox's mount table names a path
// under berth's data directory dir (the overlay's upper, say).
func noHostPaths(t *testing.T, ep runtime.Endpoint, dir string) {
	t.Helper()
	mi := bash(t, ep, `while read -r l; do echo "$l"; done < /proc/self/mountinfo`).Stdout
	if mi == "" || strings.Contains(mi, dir) {
		t.Fatalf("the sandbox's mount table names berth's data directory %s:\n%s", dir, mi)
	}
}
