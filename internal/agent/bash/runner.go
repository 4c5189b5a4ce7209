// Package bash runs one-shot bash commands for the agent (IdeGYM's
// POST /api/tools/bash): each command runs in its own process group with
// bounded output capture, a timeout that terminates the whole group, and
// cleanup of whatever the command left running when it ends.
package bash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/berth-mcp/berth/internal/agent/output"
	"github.com/berth-mcp/berth/internal/wire"
)

// Runner runs one-shot bash commands inside a workspace.
type Runner struct {
	Workspace string // relative Cwd values resolve against it
	// Dir is the cwd of commands that name none ("" = Workspace).
	Dir string
	// User is who commands that name no user run as ("" = the agent's
	// user): name, uid, name:group or uid:gid, as an image's USER.
	User    string
	Shell   string   // path to bash; "" = look up "bash" on PATH
	BaseEnv []string // environment for commands; nil = os.Environ()
}

// timeoutExitCode is what timeout(1) and IdeGYM report for a command that
// ran out of time.
const timeoutExitCode = 124

// sourceScript is what bash runs: it sources the command from the pipe.
// Run as a script, bash would read the pipe a byte per system call (it
// must not read past the line it executes from input it cannot seek), a
// million calls for a megabyte heredoc; sourcing reads it in blocks.
// Errors still name /dev/fd/3 and its line numbers, and $0 is /dev/fd/3;
// a top-level return now ends the command, as in any sourced file.
const sourceScript = ". /dev/fd/3"

// scriptPrefix runs before the caller's first line, on the same line so
// that $LINENO stays right: it closes the inherited command pipe so that
// the command's own children never see it.
const scriptPrefix = "exec 3<&-; "

// Run runs req.Command with bash and returns its output and exit status. A
// non-zero exit or a timeout (including ctx ending mid-run) is a result;
// the error is for invalid requests (coded wire.CodeBadRequest), a ctx
// that ended before the start, and failures to start bash. The script
// is read from an inherited descriptor, so $0 is /dev/fd/3.
func (r *Runner) Run(ctx context.Context, req wire.BashRequest) (wire.BashResult, error) {
	p, err := r.plan(req)
	if err != nil {
		return wire.BashResult{}, err
	}
	stdout, stderr := output.NewBuffer(p.limit), output.NewBuffer(p.limit)
	end, err := r.run(ctx, p, stdout, stderr)
	if err != nil {
		return wire.BashResult{}, err
	}
	res := wire.BashResult{
		Stdout:               stdout.String(),
		Stderr:               stderr.String(),
		ExitCode:             end.exitCode,
		DurationMS:           end.duration.Milliseconds(),
		TimedOut:             end.timedOut,
		StdoutTruncatedBytes: stdout.Omitted(),
		StderrTruncatedBytes: stderr.Omitted(),
	}
	if p.strip {
		res.Stdout, res.Stderr = strings.TrimSpace(res.Stdout), strings.TrimSpace(res.Stderr)
	}
	wire.FitOutput(&res, p.limit)
	return res, nil
}

// ended is how a command ended.
type ended struct {
	exitCode int
	timedOut bool
	duration time.Duration
}

// run runs the planned command, writing its output to stdout and stderr
// (each from one goroutine at a time) until it ends.
func (r *Runner) run(ctx context.Context, p *plan, stdout, stderr io.Writer) (ended, error) {
	if err := ctx.Err(); err != nil {
		return ended{}, fmt.Errorf("run bash: %w", err)
	}
	shell := r.Shell
	if shell == "" {
		shell = "bash"
	}
	pr, err := newPipes()
	if err != nil {
		return ended{}, err
	}
	defer pr.closeParent()
	defer pr.closeChild() // on early returns; closing twice is harmless

	// The command text travels through an inherited pipe rather than argv,
	// so it is not bound by the kernel's argument size limit. Bash reopens
	// it through /dev/fd/3, which checks the pipe's owner, so the pipe is
	// handed to the user the command runs as.
	if p.cred != nil {
		if err := pr.scriptR.Chown(int(p.cred.sys.Uid), int(p.cred.sys.Gid)); err != nil {
			return ended{}, fmt.Errorf("hand command pipe to user %q: %w", p.cred.name, err)
		}
	}
	cmd := exec.Command(shell, "-c", sourceScript, "/dev/fd/3")
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = pr.outW
	cmd.Stderr = pr.errW
	cmd.ExtraFiles = []*os.File{pr.scriptR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.cred != nil {
		cmd.SysProcAttr.Credential = p.cred.sys
	}

	start := time.Now()
	err = cmd.Start()
	pr.closeChild()
	if err != nil {
		if p.cred != nil && errors.Is(err, fs.ErrPermission) {
			return ended{}, wire.Errorf(wire.CodeBadRequest, "start bash as user %q in cwd %q: %w", p.cred.name, p.cwd, pathless(err))
		}
		return ended{}, fmt.Errorf("start %s: %w", shell, pathless(err))
	}

	ios := pr.startIO(p.commands, stdout, stderr)
	timedOut := supervise(ctx, cmd.Process.Pid, p.timeout, p.grace)
	waitErr := cmd.Wait()
	ios.finish()

	end := ended{timedOut: timedOut, duration: time.Since(start)}
	switch st := cmd.ProcessState; {
	case timedOut:
		end.exitCode = timeoutExitCode
	case st == nil:
		return end, fmt.Errorf("wait for bash: %w", waitErr)
	default:
		end.exitCode = exitCode(st)
	}
	return end, nil
}

// exitCode reports a death by signal the way bash does, as 128+signal.
func exitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
