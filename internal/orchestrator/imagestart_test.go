package orchestrator_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

// imageService is an orchestrator whose local runtime pulls from reg over
// plain HTTP.
func imageService(t testing.TB, reg *imagetest.Registry, cfg orchestrator.Config) *orchtest.Env {
	t.Helper()
	dir := orchtest.DataDir(t)
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, PlainHTTPRegistries: []string{reg.Host},
		Logger: orchtest.Logger(t)})
	e := orchtest.NewOn(t, rt, testConfig(t, cfg))
	e.Runtime, e.DataDir = rt, dir
	return e
}

// pushBashImage pushes an image of the host's bash, with a marker and a
// payload big enough to watch its pull, and returns its reference and
// its layer.
func pushBashImage(t testing.TB, reg *imagetest.Registry, repoTag string) (string, imagetest.Layer) {
	t.Helper()
	payload := make([]byte, 3<<20)
	for i := range payload {
		payload[i] = byte(i * 7919 >> 3)
	}
	l := imagetest.GzLayer(t, imagetest.Tar(t, append(imagetest.HostRootfsEntries(t, "mkdir"), imagetest.File("etc/image-marker", repoTag+"\n"),
		imagetest.Dir("opt/"), imagetest.File("opt/payload", string(payload)))...))
	reg.Push(t, repoTag, imagetest.ImageSpec{}, l)
	return reg.Host + "/" + repoTag, l
}

// TestStartFromImage: start_server with an image reference pulls it,
// reporting the pull's bytes and layers as the start's progress, and
// records the server's image by its normalized name; what the sandbox
// installs into its root survives its agent's death and restart.
func TestStartFromImage(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	ref, layer := pushBashImage(t, reg, "team/app:1")
	e := imageService(t, reg, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "images")

	// The layer's download is held half way until the start has
	// reported progress.
	stall := make(chan struct{})
	reg.Stall(layer.Digest, stall)
	var (
		mu    sync.Mutex
		seen  []orchestrator.Operation
		heard = make(chan struct{}, 1)
	)
	pctx := orchestrator.WithProgress(ctx, func(op orchestrator.Operation) {
		mu.Lock()
		seen = append(seen, op)
		mu.Unlock()
		if op.Progress != nil {
			select {
			case heard <- struct{}{}:
			default:
			}
		}
	})
	type started struct {
		op  orchestrator.Operation
		err error
	}
	done := make(chan started, 1)
	go func() {
		op, err := e.Svc.StartServer(pctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: ref,
			RestartPolicy: orchestrator.RestartOnFailure, WaitSeconds: deadline.Seconds()})
		done <- started{op, err}
	}()
	select {
	case <-heard:
	case <-time.After(deadline):
		t.Fatal("no progress reported while the image was pulled")
	}
	close(stall)
	st := <-done
	if st.err != nil {
		t.Fatal(st.err)
	}
	srv := startResult(t, st.op).Server
	if srv.ImageTag != ref {
		t.Fatalf("the server's image is %q, want %q", srv.ImageTag, ref)
	}
	mu.Lock()
	var pulled *orchestrator.Operation
	for i := range seen {
		if p := seen[i].Progress; p != nil && strings.Contains(p.Step, ref) && p.LayersTotal == 1 && p.BytesTotal == int64(len(layer.Blob)) {
			pulled = &seen[i]
			break
		}
	}
	mu.Unlock()
	if pulled == nil || pulled.Status != orchestrator.OpInProgress {
		t.Fatalf("progress reports %+v: want one of the running start naming %s, 1 layer and %d bytes", seen, ref, len(layer.Blob))
	}
	if msg := orchestrator.Describe(*pulled); !strings.Contains(msg, "pulling "+ref) || !strings.Contains(msg, "of 1 layers") {
		t.Fatalf("the progress message %q says nothing of the pull", msg)
	}
	if stage := orchestrator.Stage(*pulled); stage < 0.5 || stage > 0.9 {
		t.Fatalf("a pull's stage is %v, want between 0.5 and 0.9", stage)
	}

	if got := bash(t, e.Svc, alice, srv.ID, `echo "$(</etc/image-marker)"; mkdir -p /opt/tool && echo installed > /opt/tool/marker && echo ok`, nil).Stdout; got != "team/app:1\nok\n" {
		t.Fatalf("in the image's sandbox: %q", got)
	}
	if _, err := e.Svc.RunBashCommand(ctx, alice, orchestrator.RunBashRequest{ServerID: srv.ID, Command: "kill -KILL $PPID", WaitSeconds: deadline.Seconds()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to be restarted", func() (bool, error) {
		s, err := e.Svc.GetServer(ctx, alice, srv.ID)
		return s.Status == orchestrator.ServerRunning && s.Restarts == 1, err
	})
	if got := bash(t, e.Svc, alice, srv.ID, `echo "$(</opt/tool/marker)"`, nil).Stdout; got != "installed\n" {
		t.Fatalf("after the agent's restart /opt/tool/marker holds %q", got)
	}

	// list_images: the cache holds the image, used by the server; only a
	// global admin (alice, the first user) sees which images it holds.
	list, err := e.Svc.ListImages(ctx, alice)
	if err != nil || list.CachedN != 1 || len(list.Cached) != 1 || list.Cached[0].Refs[0] != ref || list.Cached[0].Sandboxes != 1 ||
		list.CacheLimit <= 0 || !slices.Contains(list.Named, "host") || len(list.Configured) != 1 || list.Configured[0].Name != "base" ||
		!list.Configured[0].Session {
		t.Fatalf("list_images for an admin: %+v, %v", list, err)
	}
	bob := principal(t, e.Svc, "bob")
	if list, err = e.Svc.ListImages(ctx, bob); err != nil || list.CachedN != 1 || list.Cached != nil {
		t.Fatalf("list_images for a member: %+v, %v; want the count without the images", list, err)
	}
}

// TestStartFromMissingImage: a reference the registry does not have is
// accepted by the call (it is well formed) and fails the start with the
// registry's answer, naming the image, leaving no sandbox.
func TestStartFromMissingImage(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	e := imageService(t, reg, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "images")
	ref := reg.Host + "/team/missing:1"
	op, err := e.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: ref, WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeBadRequest || !strings.Contains(op.Error, ref) || !strings.Contains(op.Error, "no such image") {
		t.Fatalf("start from a missing image: %s %s %q; want FAILED, bad_request, naming it", op.Status, op.ErrorCode, op.Error)
	}
	if ids, err := e.Runtime.List(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("after the failed start the runtime holds %v (%v)", ids, err)
	}
}

// TestWarmPoolOfImage: a warm pool configured by one spelling of an image
// reference serves starts by another, since both name one image; the
// warm server is of the image, pulled ahead.
func TestWarmPoolOfImage(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	ref, _ := pushBashImage(t, reg, "team/app:latest")
	e := imageService(t, reg, orchestrator.Config{WarmPool: map[string]int{reg.Host + "/team/app": 1}})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "warm")
	waitWarm(t, e, ref)
	res := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: ref})
	if !res.Warm || res.Server.ImageTag != ref {
		t.Fatalf("start of %s: warm %v, image %q; want the warm server of the pool configured as %s/team/app", ref, res.Warm, res.Server.ImageTag, reg.Host)
	}
	if got := bash(t, e.Svc, alice, res.ServerID, `echo "$(</etc/image-marker)"`, nil).Stdout; got != "team/app:latest\n" {
		t.Fatalf("the warm server's root holds %q", got)
	}
	if _, err := e.Svc.ListImages(ctx, alice); err != nil {
		t.Fatal(err)
	}
}

// TestBuildImagesFromAnImage: build_images_from_yaml with an image as
// base makes an OCI image on the local runtime: pushed to the operator's
// registry, its job's tag is the registry's reference, and start_server
// starts a server from that tag and from the bare name, with what the
// build installed and left in its workspace.
func TestBuildImagesFromAnImage(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	base, _ := pushBashImage(t, reg, "team/base:1")
	dir := orchtest.DataDir(t)
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: dir, AgentBinary: agentBin, PlainHTTPRegistries: []string{reg.Host},
		ImageRegistry: reg.Host + "/built", Logger: orchtest.Logger(t)})
	e := orchtest.NewOn(t, rt, testConfig(t, orchestrator.Config{}))
	admin := principal(t, e.Svc, "admin")
	res := buildAndWait(t, e.Svc, admin, `images:
  - name: tooled
    base: `+base+`
    files:
      notes.txt: "from the yaml\n"
    commands:
      - mkdir -p /usr/local/bin && echo 'echo tool ran' > /usr/local/bin/tool
      - read -r m < /etc/image-marker && echo $m > marker-was
      - mkdir -p /opt/new && echo installed > /opt/new/file
`)
	job := res.Jobs[0]
	if job.Status != orchestrator.JobSuccess || job.Tag != reg.Host+"/built/tooled:"+job.JobName {
		t.Fatalf("job %+v, want it pushed as %s/built/tooled:%s", job, reg.Host, job.JobName)
	}
	c := registerClient(t, e.Svc, admin, "built")
	for _, tag := range []string{job.Tag, "tooled"} {
		srv := startServer(t, e.Svc, admin, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: tag})
		out := bash(t, e.Svc, admin, srv.ServerID, "bash /usr/local/bin/tool; for f in /opt/new/file notes.txt marker-was; do echo \"$(<$f)\"; done", nil)
		if out.ExitCode != 0 || out.Stdout != "tool ran\ninstalled\nfrom the yaml\nteam/base:1\n" {
			t.Fatalf("a server of %s sees %q (%s)", tag, out.Stdout, out.Stderr)
		}
	}
}
