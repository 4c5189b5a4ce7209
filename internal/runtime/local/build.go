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

	"github.com/berth-mcp/berth/internal/runtime"
)

var _ runtime.ImageBuilder = (*Runtime)(nil)

// buildReadyTimeout bounds waiting for a build sandbox's agent.
const buildReadyTimeout = 2 * time.Minute

// defaultBuildTimeout bounds a build whose context has no deadline.
const defaultBuildTimeout = time.Hour

// BuildImage implements runtime.ImageBuilder. The build runs in a fresh
// sandbox made by Create, named b.ID, confined like every other, whose
// workspace starts from the template b.Base: the files are written and
// the commands run through its agent, then the sandbox is stopped and its
// workspace copied out (see template.go) and installed as the template
// b.Name. The sandbox is deleted at the end, whatever happened.
//
// The build is driven by this call, so a sandbox left by an earlier call
// with the same ID (its replica died) has nobody driving it: it is deleted
// and the build starts again from its base.
func (r *Runtime) BuildImage(ctx context.Context, b runtime.ImageBuild) (runtime.BuildResult, error) {
	if err := checkID(b.ID); err != nil {
		return runtime.BuildResult{}, err
	}
	if !validTemplateName(b.Name) {
		return runtime.BuildResult{}, fmt.Errorf("build %s: image name %q is not a template name", b.ID, b.Name)
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
	}()
	log := &tailBuffer{max: runtime.MaxBuildLog}
	run := &build{r: r, b: b, log: log, step: step}
	if err := run.inSandbox(ctx); err != nil {
		var f *runtime.BuildFailed
		if errors.As(err, &f) {
			f.Log = log.String()
		}
		return runtime.BuildResult{}, r.hideHostPaths("build image", b.ID, err)
	}
	return runtime.BuildResult{Image: b.Name, Log: log.String()}, nil
}

// build is one run of BuildImage.
type build struct {
	r    *Runtime
	b    runtime.ImageBuild
	log  *tailBuffer
	step func(string)
}

func (run *build) inSandbox(ctx context.Context) error {
	r, b := run.r, run.b
	token, err := buildToken()
	if err != nil {
		return err
	}
	run.step("starting a sandbox from " + b.Base)
	// Builds keep a workspace as a template, over the host system: their
	// base names a template, anything else an empty workspace, as before
	// sandboxes started from OCI images.
	base := b.Base
	if ref, err := r.imageRef(base); err != nil || ref != "" {
		base = hostImage
	}
	spec := runtime.Spec{
		ServerID: b.ID, Namespace: b.Namespace, OwnerID: b.OwnerID, ImageTag: base,
		RuntimeClassName: b.RuntimeClassName, Resources: b.Resources, Env: b.Env, AgentToken: token,
	}
	if err := r.Create(ctx, spec); err != nil {
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

// keep stops the build's sandbox, so nothing in it changes its files any
// more, copies its workspace out and installs the copy as the template.
func (run *build) keep(ctx context.Context) error {
	r, b := run.r, run.b
	run.step("keeping the workspace as image " + b.Name)
	unlock := r.lock(b.ID)
	err := r.stop(ctx, b.ID)
	unlock()
	if err != nil {
		return fmt.Errorf("build %s: stop its sandbox: %w", b.ID, err)
	}
	staging := filepath.Join(r.opts.DataDir, "image-builds")
	if err := mkdirPrivate(staging, 0o700); err != nil {
		return fmt.Errorf("build %s: %w", b.ID, err)
	}
	staged := filepath.Join(staging, b.ID)
	// Left by an earlier attempt: berth's own copy, safe to remove.
	if err := os.RemoveAll(staged); err != nil {
		return fmt.Errorf("build %s: %w", b.ID, err)
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
