package kubetest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// proc is one attempt of a container: a process group on the host, or a
// built-in (Kaniko) that only pretends to be one.
type proc interface {
	id() string // the containerID reported in status
	signal(sig syscall.Signal)
	done() <-chan struct{}
	exitCode() int // valid after done
	oomKilled() bool
}

// osProc is a container's process, alone in its process group so that
// signals reach whatever it started, and killed by the kernel should the
// test binary die first.
type osProc struct {
	cmd  *exec.Cmd
	fin  chan struct{}
	code int
	oom  bool
}

// startOSProc starts cmd; cg, when not nil, is the attempt's memory
// cgroup (cmd enters it itself), removed when the attempt ends. j learns
// of the process group while it lives.
func startOSProc(cmd *exec.Cmd, cg *memCgroup, j *janitor) (*osProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child that keeps the output pipe open must not keep the attempt
	// running after its main process exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &osProc{cmd: cmd, fin: make(chan struct{})}
	j.add(cmd.Process.Pid)
	go func() {
		_ = cmd.Wait()
		p.code = exitCodeOf(cmd)
		// What the main process left running goes with it, as a
		// container's processes end with its init.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		j.remove(cmd.Process.Pid)
		if cg != nil {
			p.oom = p.code == 128+int(syscall.SIGKILL) && cg.oomKilled()
			cg.remove()
		}
		close(p.fin)
	}()
	return p, nil
}

func (p *osProc) id() string { return "process://" + strconv.Itoa(p.cmd.Process.Pid) }

func (p *osProc) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *osProc) done() <-chan struct{} { return p.fin }
func (p *osProc) exitCode() int         { return p.code }
func (p *osProc) oomKilled() bool       { return p.oom }

// exitCodeOf is the container exit code of a finished command: its exit
// status, or 128+signal as container runtimes report a killed process.
func exitCodeOf(cmd *exec.Cmd) int {
	st := cmd.ProcessState
	if st == nil {
		return 128
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// builtinProc runs fn in a goroutine as if it were a process: a signal
// cancels its context.
type builtinProc struct {
	name   string
	cancel context.CancelFunc
	fin    chan struct{}
	code   int
	once   sync.Once
}

func startBuiltin(ctx context.Context, name string, fn func(context.Context) int) *builtinProc {
	ctx, cancel := context.WithCancel(ctx)
	p := &builtinProc{name: name, cancel: cancel, fin: make(chan struct{})}
	go func() {
		defer cancel()
		p.code = fn(ctx)
		close(p.fin)
	}()
	return p
}

func (p *builtinProc) id() string            { return fmt.Sprintf("builtin://%s", p.name) }
func (p *builtinProc) signal(syscall.Signal) { p.once.Do(p.cancel) }
func (p *builtinProc) done() <-chan struct{} { return p.fin }
func (p *builtinProc) exitCode() int         { return p.code }
func (p *builtinProc) oomKilled() bool       { return false }
