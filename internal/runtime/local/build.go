//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

var _ runtime.ImageBuilder = (*Runtime)(nil)

// buildReadyTimeout bounds waiting for a build sandbox's agent.
const buildReadyTimeout = 2 * time.Minute

// defaultBuildTimeout bounds a build whose context has no deadline.
const defaultBuildTimeout = time.Hour

// BuildImage implements runtime.ImageBuilder. The build runs in a fresh
// sandbox made by Create, named b.ID, confined like every other, started
// from b.Base: the files are written and the commands run through its
// agent, then the sandbox is stopped and what it made is kept as the
// image b.Name:
//   - from an OCI image (a reference, or the name of an image built here):
//     a new OCI image, the base's layers and one more made of what the
//     sandbox changed of its root filesystem (its overlay's upper
//     directory) and of its workspace, at /workspace (see buildimage.go);
//   - from the host system (host, base without a built image, or a
//     workspace template): a workspace template, its workspace copied out
//     (see template.go), since the host system is no image to add to.
//
// The sandbox is deleted at the end, whatever happened. The build is
// driven by this call, so a sandbox left by an earlier call with the same
// ID (its replica died) has nobody driving it: it is deleted and the
// build starts again from its base.
func (r *Runtime) BuildImage(ctx context.Context, b runtime.ImageBuild) (runtime.BuildResult, error) {
	if err := checkID(b.ID); err != nil {
		return runtime.BuildResult{}, err
	}
	if !validTemplateName(b.Name) {
		return runtime.BuildResult{}, fmt.Errorf("build %s: image name %q is not a template name", b.ID, b.Name)
	}
	baseRef, err := r.imageRef(b.Base)
	if err != nil {
		var unknown *runtime.UnknownImage
		if errors.As(err, &unknown) {
			return runtime.BuildResult{}, &runtime.BuildFailed{Reason: "base: " + unknown.Reason}
		}
		return runtime.BuildResult{}, r.hideHostPaths("build image", b.ID, err)
	}
	if baseRef != "" {
		if r.cache == nil {
			return runtime.BuildResult{}, &runtime.BuildFailed{Reason: fmt.Sprintf("base %s: builds from OCI images need full isolation (this berth runs with --isolation none): build from host or a template", baseRef)}
		}
		if _, err := image.LocalRef(b.Name, b.ID); err != nil {
			return runtime.BuildResult{}, &runtime.BuildFailed{Reason: fmt.Sprintf("image name %q: %s", b.Name, wire.DetailOf(err).Message)}
		}
	}
	// Create and Delete take the sandbox's own lock: this one keeps two
	// builds of one ID in this runtime from interleaving.
	unlock := r.lock("build:" + b.ID)
	defer unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultBuildTimeout)
		defer cancel()
	}
	step := b.Step
	if step == nil {
		step = func(string) {}
	}
	if err := r.Delete(ctx, b.ID); err != nil {
		return runtime.BuildResult{}, fmt.Errorf("build %s: remove an earlier attempt: %w", b.ID, err)
	}
	defer func() {
		// Bounded: a shutting-down replica must not wait for ever.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := r.Delete(dctx, b.ID); err != nil {
			r.log.Warn("delete a build's sandbox", "build", b.ID, "err", err)
		}
		os.RemoveAll(r.buildStaging(b.ID))
	}()
	log := &tailBuffer{max: runtime.MaxBuildLog}
	run := &build{r: r, b: b, baseRef: baseRef, log: log, step: step, image: b.Name}
	if err := run.inSandbox(ctx); err != nil {
		var f *runtime.BuildFailed
		if errors.As(err, &f) {
			f.Log = log.String()
		}
		return runtime.BuildResult{}, r.hideHostPaths("build image", b.ID, err)
	}
	return runtime.BuildResult{Image: run.image, Log: log.String()}, nil
}

// build is one run of BuildImage.
type build struct {
	r *Runtime
	b runtime.ImageBuild
	// baseRef is the OCI image the build starts from, "" for the host
	// system.
	baseRef string
	log     *tailBuffer
	step    func(string)
	// image is what the build made, by the name start_server takes.
	image string
}

func (run *build) inSandbox(ctx context.Context) error {
	r, b := run.r, run.b
	token, err := buildToken()
	if err != nil {
		return err
	}
	run.step("starting a sandbox from " + b.Base)
	base := b.Base
	if run.baseRef != "" {
		base = run.baseRef
	}
	spec := runtime.Spec{
		ServerID: b.ID, Namespace: b.Namespace, OwnerID: b.OwnerID, ImageTag: base,
		RuntimeClassName: b.RuntimeClassName, Resources: b.Resources, Env: b.Env, AgentToken: token,
	}
	if err := r.Create(ctx, spec); err != nil {
		if ctx.Err() == nil && wire.DetailOf(err).Code == wire.CodeBadRequest {
			// The base is the caller's: an image the registry refuses.
			return &runtime.BuildFailed{Reason: fmt.Sprintf("the build's sandbox did not start: %s", wire.DetailOf(err).Message)}
		}
		return fmt.Errorf("build %s: %w", b.ID, err)
	}
	readyCtx, cancel := context.WithTimeout(ctx, buildReadyTimeout)
	ep, err := r.WaitReady(readyCtx, b.ID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &runtime.BuildFailed{Reason: fmt.Sprintf("the build's sandbox did not start: %v", err)}
	}
	agent := newBuildAgent(ep.Address, token)
	defer agent.close()
	for _, f := range b.Files {
		run.step("writing " + f.Path)
		if err := agent.writeFile(ctx, f.Path, f.Content); err != nil {
			return run.failed(ctx, fmt.Sprintf("file %s could not be written", f.Path), err)
		}
	}
	for i, c := range b.Commands {
		if err := run.command(ctx, agent, i, c); err != nil {
			return err
		}
	}
	unlock := r.lock(b.ID)
	err = r.stop(ctx, b.ID)
	unlock()
	if err != nil {
		return fmt.Errorf("build %s: stop its sandbox: %w", b.ID, err)
	}
	if run.baseRef != "" {
		return run.keepImage(ctx)
	}
	return run.keep(ctx)
}

// command runs the build's i-th command and fails the build unless it
// exits 0.
func (run *build) command(ctx context.Context, agent *buildAgent, i int, command string) error {
	n := len(run.b.Commands)
	run.step(fmt.Sprintf("%d/%d %s", i+1, n, firstLine(command, 80)))
	fmt.Fprintf(run.log, "$ %s\n", command)
	// The agent ends the command (SIGTERM, SIGKILL 2 s later) a little
	// before the build's deadline, so a command that runs too long fails
	// with its output rather than with a cancelled call.
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	timeout := left - min(10*time.Second, left/5)
	if timeout <= 0 {
		return fmt.Errorf("build %s: %w", run.b.ID, context.DeadlineExceeded)
	}
	res, err := agent.bash(ctx, command, timeout)
	what := fmt.Sprintf("command %d of %d (%s)", i+1, n, firstLine(command, 200))
	if err != nil {
		return run.failed(ctx, what+" did not finish", err)
	}
	out := res.Stdout + res.Stderr
	run.log.WriteString(out)
	if out != "" && !strings.HasSuffix(out, "\n") {
		run.log.WriteString("\n")
	}
	switch {
	case res.TimedOut:
		return &runtime.BuildFailed{Reason: what + " ran out of the build's time and was stopped" + outputEnd(out)}
	case res.ExitCode != 0:
		return &runtime.BuildFailed{Reason: fmt.Sprintf("%s exited with status %d%s", what, res.ExitCode, outputEnd(out))}
	}
	return nil
}

// outputEnd ends a failed command's reason with the end of its output.
func outputEnd(out string) string {
	if tail := lastBytes(out, 2048); tail != "" {
		return "; its output ends:\n" + tail
	}
	return "; it printed nothing"
}

// failed turns an error talking to the build's agent into the build's
// failure, unless the build was cancelled.
func (run *build) failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	reason := fmt.Sprintf("%s: %v", what, err)
	if st, serr := run.r.Status(context.WithoutCancel(ctx), run.b.ID); serr == nil && st.State == runtime.StateFailed {
		reason += "; the sandbox stopped: " + st.Message
	}
	return &runtime.BuildFailed{Reason: reason}
}

// buildStaging is where a build stages what it keeps; berth's own,
// removed at the build's end.
func (r *Runtime) buildStaging(id string) string {
	return filepath.Join(r.opts.DataDir, "image-builds", id)
}

// stage makes the build's staging directory anew: what an earlier attempt
// left there is berth's own copy, safe to remove.
func (run *build) stage() (string, error) {
	staging := filepath.Join(run.r.opts.DataDir, "image-builds")
	if err := mkdirPrivate(staging, 0o700); err != nil {
		return "", fmt.Errorf("build %s: %w", run.b.ID, err)
	}
	staged := run.r.buildStaging(run.b.ID)
	if err := os.RemoveAll(staged); err != nil {
		return "", fmt.Errorf("build %s: %w", run.b.ID, err)
	}
	return staged, nil
}

// keep copies the stopped build sandbox's workspace out and installs the
// copy as the template: a build over the host system.
func (run *build) keep(ctx context.Context) error {
	r, b := run.r, run.b
	run.step("keeping the workspace as image " + b.Name)
	staged, err := run.stage()
	if err != nil {
		return err
	}
	// The copy is written into the data directory: its size is taken
	// from the space above the reserve until it is in place.
	release, err := r.space.take(r.workspaceUse(b.ID), "the copy of the build's workspace kept as image "+b.Name)
	if err != nil {
		return &runtime.BuildFailed{Reason: err.Error()}
	}
	defer release()
	skipped, err := copyWorkspace(r.workspacePath(b.ID), staged, r.opts.Limits.DiskBytes)
	if err == nil {
		err = r.installTemplate(staged, b.Name)
	}
	if err != nil {
		os.RemoveAll(staged)
		var ref *templateRefused
		if errors.As(err, &ref) {
			return &runtime.BuildFailed{Reason: ref.msg}
		}
		return fmt.Errorf("build %s: keep the workspace: %w", b.ID, err)
	}
	if err := r.dropBuiltName(b.Name); err != nil {
		return fmt.Errorf("build %s: the image the template replaces: %w", b.ID, err)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(run.log, "skipped sockets (they hold nothing once their process is gone): %s\n", strings.Join(skipped, ", "))
	}
	return nil
}

// workspaceUse is what the files of a stopped sandbox's workspace take:
// its volume's used space; 0 for an unconfined one, whose copy is bounded
// by the disk limit alone.
func (r *Runtime) workspaceUse(id string) int64 {
	if r.confine == nil {
		return 0
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(r.dir(id), volumeDir), &st); err != nil {
		return r.opts.Limits.DiskBytes
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize)
}

// validTemplateName says whether name can be a template directory.
func validTemplateName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 && !strings.ContainsAny(name, "/\x00")
}

// buildToken makes a build sandbox's agent token. Only this call talks to
// that agent, so the token lives in memory only: a later attempt makes a
// new sandbox with a new token.
func buildToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		s = "..." + strings.ToValidUTF8(s[len(s)-n:], "")
	}
	return strings.TrimRight(s, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) WriteString(s string) { t.Write([]byte(s)) }

func (t *tailBuffer) String() string { return strings.ToValidUTF8(string(t.b), "") }
