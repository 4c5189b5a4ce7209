package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// buildAndWait builds the images of doc and waits for their jobs.
func buildAndWait(t testing.TB, svc *orchestrator.Service, p rbac.Principal, doc string) orchestrator.BuildImagesResult {
	t.Helper()
	res, err := svc.BuildImages(context.Background(), p, orchestrator.BuildImagesRequest{YAMLContent: doc, WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatalf("build images: %v", err)
	}
	if len(res.Jobs) != len(res.JobNames) {
		t.Fatalf("result %+v", res)
	}
	return res
}

// TestBuildImages: a YAML with files and commands builds an image that
// start_server then starts from; a failing command fails its job with the
// exit status and the output's end; the env's values are not stored in
// clear.
func TestBuildImages(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	admin := principal(t, h.Svc, "admin")
	doc := `images:
  - name: built
    base: base
    env:
      SECRET_TOKEN: s3cr3t-build-value
    files:
      src/hello.txt: |
        hello from files
    commands:
      - mkdir -p out && tr a-z A-Z < src/hello.txt > out/upper.txt
      - echo "$SECRET_TOKEN" | wc -c > out/secret-length
  - name: broken
    base: base
    commands:
      - echo fine
      - echo going wrong; echo the-cause >&2; exit 7
`
	res := buildAndWait(t, h.Svc, admin, doc)
	if len(res.JobNames) != 2 || !strings.HasPrefix(res.JobNames[0], "build-built-") || !strings.HasPrefix(res.JobNames[1], "build-broken-") {
		t.Fatalf("job names %v", res.JobNames)
	}
	ok, bad := res.Jobs[0], res.Jobs[1]
	if ok.Status != orchestrator.JobSuccess || ok.State != store.BuildSucceeded || ok.Tag != "built" || ok.Image != "built" || ok.Base != "base" ||
		ok.RequestID != res.RequestID || ok.FinishedAt < ok.StartedAt || ok.StartedAt < ok.CreatedAt {
		t.Fatalf("successful job %+v", ok)
	}
	if bad.Status != orchestrator.JobFailure || bad.Tag != "" {
		t.Fatalf("failing job %+v", bad)
	}
	for _, w := range []string{"command 2 of 2", "status 7", "the-cause"} {
		if !strings.Contains(bad.Details, w) {
			t.Errorf("failure details %q do not name %q", bad.Details, w)
		}
	}
	if !strings.Contains(bad.LogTail, "going wrong") {
		t.Errorf("log tail %q", bad.LogTail)
	}
	got, err := h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: bad.JobName})
	if err != nil || got.Status != orchestrator.JobFailure || got.Details != bad.Details {
		t.Fatalf("get_job_status of the failed job: %+v %v", got, err)
	}
	op, err := h.Svc.GetOperation(ctx, admin, bad.OperationID, 0)
	if err != nil || op.Status != orchestrator.OpFailed || op.ErrorCode != wire.CodeBadRequest || !strings.Contains(op.Error, "status 7") {
		t.Fatalf("the failed job's operation %+v %v", op, err)
	}
	var stored string
	if err := h.Store.Pool.QueryRow(ctx, `SELECT spec::text || coalesce(encode(env_sealed, 'escape'), '') FROM build_jobs WHERE job_name = $1`, ok.JobName).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "s3cr3t-build-value") || !strings.Contains(stored, "SECRET_TOKEN") {
		t.Fatalf("job row holds %q: want the env's name, not its value", stored)
	}

	// start_server with the image's tag starts from it.
	c := registerClient(t, h.Svc, admin, "images")
	srv := startServer(t, h.Svc, admin, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: ok.Tag})
	out := bash(t, h.Svc, admin, srv.ServerID, "cat src/hello.txt out/upper.txt out/secret-length; echo env=$SECRET_TOKEN", nil)
	if out.ExitCode != 0 || out.Stdout != "hello from files\nHELLO FROM FILES\n19\nenv=\n" {
		t.Fatalf("a server from the image sees %q (%s)", out.Stdout, out.Stderr)
	}
	// Nothing of the builds is left in the runtime.
	ids, err := h.Runtime.List(ctx)
	if err != nil || len(ids) != 1 || ids[0] != srv.ServerID {
		t.Fatalf("sandboxes %v %v, want only the server's", ids, err)
	}
	if _, err := os.Lstat(filepath.Join(h.DataDir, "images", "broken")); !os.IsNotExist(err) {
		t.Fatalf("a failed build left an image: %v", err)
	}
}

// TestBuildImagesRefused: bad YAML names the field and line; only a
// global admin builds; jobs are their owner's; bad waits and names.
func TestBuildImagesRefused(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	admin := principal(t, h.Svc, "admin")
	member := principal(t, h.Svc, "member")
	_, err := h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images:\n  - name: a\n    base: b\n    commands: ['']\n"})
	wantCode(t, err, wire.CodeBadRequest, "images[0].commands[0] (line 4)", "empty command")
	_, err = h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{})
	wantCode(t, err, wire.CodeBadRequest, "yaml_content")
	_, err = h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images: []", YAML: "other"})
	wantCode(t, err, wire.CodeBadRequest, "differ")
	_, err = h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images: []", Namespace: "Bad_NS"})
	wantCode(t, err, wire.CodeBadRequest, "namespace")
	good := "images:\n  - {name: mine, base: base, commands: [true]}\n"
	_, err = h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: good, WaitSeconds: 301})
	wantCode(t, err, wire.CodeBadRequest, "wait_seconds")
	_, err = h.Svc.BuildImages(ctx, member, orchestrator.BuildImagesRequest{YAMLContent: good})
	wantCode(t, err, wire.CodeForbidden)

	res := buildAndWait(t, h.Svc, admin, good)
	_, err = h.Svc.GetJobStatus(ctx, member, orchestrator.JobStatusRequest{JobName: res.JobNames[0]})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: "build-none-xxxxxx"})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: "../etc"})
	wantCode(t, err, wire.CodeNotFound)
	_, err = h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: res.JobNames[0], WaitSeconds: -1})
	wantCode(t, err, wire.CodeBadRequest, "wait_seconds")
}

// noBuilds is a runtime without the ImageBuilder interface.
type noBuilds struct{ runtime.Runtime }

// TestBuildImagesNotImplemented: a runtime that cannot build makes both
// tools answer not_implemented naming it.
func TestBuildImagesNotImplemented(t *testing.T) {
	ctx := context.Background()
	rt := orchtest.NewRuntime(t, agentBin, orchtest.DataDir(t), nil)
	svc, err := orchestrator.New(storetest.New(t), noBuilds{rt}, testConfig(t, orchestrator.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := principal(t, svc, "admin")
	_, err = svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images:\n  - {name: a, base: b, commands: [true]}\n"})
	wantCode(t, err, wire.CodeNotImplemented, "local runtime does not build images")
	_, err = svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: "build-a-123456"})
	wantCode(t, err, wire.CodeNotImplemented, "local runtime")
}

// TestBuildLeftAloneByReconcile: while a build runs, the watcher's
// reconciliation does not take its sandbox for an orphan.
func TestBuildLeftAloneByReconcile(t *testing.T) {
	ctx := context.Background()
	h := newService(t, orchestrator.Config{})
	admin := principal(t, h.Svc, "admin")
	res, err := h.Svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: `images:
  - name: slow
    base: base
    commands:
      - while [ ! -e go ]; do sleep 0.05; done
      - echo after > after
`})
	if err != nil {
		t.Fatal(err)
	}
	name := res.JobNames[0]
	waitFor(t, "the build's first command", func() (bool, error) {
		j, err := h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: name})
		return strings.HasPrefix(j.Details, "1/2 "), err
	})
	h.Svc.WatchOnce(ctx)
	// The test stands in for something the command waits for.
	if err := os.WriteFile(filepath.Join(h.DataDir, "servers", name, "volume", "workspace", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := h.Svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: name, WaitSeconds: deadline.Seconds()})
	if err != nil || j.Status != orchestrator.JobSuccess {
		t.Fatalf("job after a reconcile round: %+v %v", j, err)
	}
	// Once the job ended, a sandbox left under its name is an orphan.
	if err := h.Runtime.Create(ctx, runtime.Spec{ServerID: name, AgentToken: "leftover-leftover-leftover-leftover"}); err != nil {
		t.Fatal(err)
	}
	h.Svc.WatchOnce(ctx)
	if gone, err := sandboxGone(ctx, h.Runtime, name); err != nil || !gone {
		t.Fatalf("a finished build's leftover sandbox was not deleted: %v", err)
	}
}

// gatedBuilds holds the first build inside BuildImage until the replica
// shuts down, announcing its id: a replica that dies mid-build.
type gatedBuilds struct {
	runtime.Runtime
	entered chan string
}

func (g *gatedBuilds) BuildImage(ctx context.Context, b runtime.ImageBuild) (runtime.BuildResult, error) {
	g.entered <- b.ID
	<-ctx.Done()
	return runtime.BuildResult{}, ctx.Err()
}

// TestBuildTakenOver: a build whose replica dies is taken over by another
// replica once the lease runs out, and every replica answers for it.
func TestBuildTakenOver(t *testing.T) {
	ctx := context.Background()
	url := storetest.URL(t)
	dir := orchtest.DataDir(t)
	gate := &gatedBuilds{Runtime: orchtest.NewRuntime(t, agentBin, dir, nil), entered: make(chan string, 1)}
	a, st := replica(t, url, "replica-a", gate)
	b, _ := replica(t, url, "replica-b", orchtest.NewRuntime(t, agentBin, dir, nil))
	admin := principal(t, a, "admin")

	stopA := orchtest.Run(t, a)
	res, err := a.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images:\n  - {name: taken, base: base, commands: [echo done > done]}\n"})
	if err != nil {
		t.Fatal(err)
	}
	name := res.JobNames[0]
	select {
	case id := <-gate.entered:
		if id != name {
			t.Fatalf("replica A built %s, want %s", id, name)
		}
	case <-time.After(deadline):
		t.Fatal("replica A never ran the build")
	}
	stopA()
	// B, not running yet, already answers for A's build.
	j, err := b.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: name})
	if err != nil || j.Status != orchestrator.JobInProgress || j.State != store.BuildRunning {
		t.Fatalf("replica B sees %+v %v, want it running", j, err)
	}

	orchtest.Run(t, b)
	j, err = b.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: name, WaitSeconds: deadline.Seconds()})
	if err != nil || j.Status != orchestrator.JobSuccess || j.Tag != "taken" {
		t.Fatalf("after the takeover: %+v %v", j, err)
	}
	op, err := st.OperationByID(ctx, j.OperationID)
	if err != nil || op.Attempts != 2 || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("build operation %+v %v, want SUCCEEDED after 2 attempts", op, err)
	}
	if j, err := a.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: name}); err != nil || j.Status != orchestrator.JobSuccess {
		t.Fatalf("replica A sees %+v %v", j, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "images", "taken", "done")); err != nil || string(b) != "done\n" {
		t.Fatalf("image built by B: %q %v", b, err)
	}
}

// TestBuildEndsWithItsOperation: a build whose operation ended without
// running it (the watcher failed it as stuck, its attempts ran out)
// answers as failed, with the operation's reason.
func TestBuildEndsWithItsOperation(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	svc, err := orchestrator.New(st, orchtest.NewRuntime(t, agentBin, orchtest.DataDir(t), nil), testConfig(t, orchestrator.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := principal(t, svc, "admin")
	// Run is not running: nothing picks the build up.
	res, err := svc.BuildImages(ctx, admin, orchestrator.BuildImagesRequest{YAMLContent: "images:\n  - {name: never, base: base, commands: [true]}\n"})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Jobs[0]
	if j.Status != orchestrator.JobInProgress || j.State != store.BuildScheduled {
		t.Fatalf("job %+v, want it scheduled", j)
	}
	const why = "operation stuck: no replica picked it up within 10m0s"
	if ok, err := st.FinishOperation(ctx, j.OperationID, "", orchestrator.OpFailed, nil, wire.CodeUnavailable, why); err != nil || !ok {
		t.Fatalf("fail the operation: %v %v", ok, err)
	}
	got, err := svc.GetJobStatus(ctx, admin, orchestrator.JobStatusRequest{JobName: j.JobName, WaitSeconds: 1})
	if err != nil || got.Status != orchestrator.JobFailure || got.State != store.BuildFailed || got.Details != why || got.FinishedAt == 0 {
		t.Fatalf("job of a failed operation: %+v %v", got, err)
	}
}
