package session

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readChunk is the size of one read from an output pipe.
const readChunk = 64 << 10

// tagVar names the environment variable that marks every process a shell
// starts with a value unique to the shell, so that ending the shell also
// finds the processes that left its process tree.
const tagVar = "BERTH_SESSION_TAG"

// shell is one long-lived bash process and the goroutines that own its
// pipes. bash runs the script /dev/fd/3, a pipe that carries one protocol
// line per call, while its stdin is /dev/null: commands can neither read
// the protocol by accident nor lose it by redirecting stdin. Their output
// comes back on stdout and stderr, each ended by the call's marker.
type shell struct {
	cmd    *exec.Cmd
	pid    int
	dir    string   // private directory holding the per-call command file
	tag    string   // environment entry that marks the shell's processes
	script *os.File // protocol lines, read by bash as its script
	outR   *os.File
	errR   *os.File
	out    chan []byte // stdout chunks; closed when the reader stops
	errc   chan []byte // stderr chunks; closed when the reader stops
	quit   chan struct{}
	exited chan struct{} // closed once the shell was reaped
	// exitCode is the shell's exit status (128+signal when killed),
	// valid once exited is closed.
	exitCode int

	readers   sync.WaitGroup
	closeOnce sync.Once
	drainOnce sync.Once

	idleMu  sync.Mutex
	idle    *idle // drains output between calls; nil during a call
	closing bool  // close began: no more idle draining
}

// startShell starts bash in its own session and sends it shellInit.
func startShell(o Options) (*shell, error) {
	if o.Workspace != "" {
		// exec would report a missing directory as a missing program.
		fi, err := os.Stat(o.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", o.Workspace)
		}
	}
	dir, err := commandDir()
	if err != nil {
		return nil, err
	}
	var files []*os.File
	fail := func(err error) (*shell, error) {
		for _, f := range files {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("create script pipe: %w", err))
	}
	files = append(files, inR, inW)
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("create stdout pipe: %w", err))
	}
	files = append(files, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("create stderr pipe: %w", err))
	}
	files = append(files, errR, errW)

	tag, err := newNonce()
	if err != nil {
		return fail(err)
	}
	tag = tagVar + "=" + tag
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	cmd := exec.Command(o.Shell, "--noprofile", "--norc", "/dev/fd/3")
	cmd.Dir = o.Workspace
	cmd.Env = append(slices.Clip(env), tag)
	cmd.Stdout, cmd.Stderr = outW, errW // stdin stays nil: /dev/null
	cmd.ExtraFiles = []*os.File{inR}
	// Setsid keeps the shell off the agent's terminal; Pdeathsig ends it
	// if the agent dies without closing the manager.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start %s: %w", o.Shell, err))
	}
	inR.Close()
	outW.Close()
	errW.Close()

	sh := &shell{
		cmd:    cmd,
		pid:    cmd.Process.Pid,
		dir:    dir,
		tag:    tag,
		script: inW,
		outR:   outR,
		errR:   errR,
		out:    make(chan []byte, 8),
		errc:   make(chan []byte, 8),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go sh.wait()
	sh.readers.Add(2)
	go sh.read(outR, sh.out)
	go sh.read(errR, sh.errc)
	sh.resumeIdle(nil, nil)
	// A failed write means the shell is already gone; the first call
	// finds that out from its streams.
	inW.WriteString(shellInit + endFuncDef(sh))
	return sh, nil
}

// shmDir is tried first for a shell's private directory: every call
// writes the command file and the jobs file there, and on a disk file
// system each write dirties an inode that can wait on the journal's
// commit (once in a few thousand calls, for milliseconds, when other
// processes on the machine fsync).
const shmDir = "/dev/shm"

// commandDir makes a shell's private directory, in memory when /dev/shm
// is there and writable, else in the temporary directory.
func commandDir() (string, error) {
	dir, err := os.MkdirTemp(shmDir, "berth-session-")
	if err == nil {
		return dir, nil
	}
	dir, err = os.MkdirTemp("", "berth-session-")
	if err != nil {
		return "", fmt.Errorf("create command directory: %w", err)
	}
	return dir, nil
}

// shellInit closes fd 3 (bash reads its script through its own copy), so
// that commands do not inherit the protocol pipe, and keeps copies of
// stdout and stderr on fds 62 and 63 for the markers, out of the way of
// the low fds scripts use. It turns on job control, so that every pipeline
// runs in a process group of its own that a timeout can end without
// ending the shell, and makes SIGUSR1 leave every loop: the call's
// one-pass loop around the command included, so the rest of the command
// is abandoned. Outside a loop the trap does nothing, quietly.
const shellInit = "exec 3<&- 62>&1 63>&2; set -m; trap 'break 1000 2>/dev/null' USR1\n"

// interrupt asks the shell to abandon the running command at the next
// command boundary (see shellInit).
func (sh *shell) interrupt() {
	sh.cmd.Process.Signal(syscall.SIGUSR1)
}

func (sh *shell) wait() {
	sh.cmd.Wait()
	sh.exitCode = exitStatus(sh.cmd.ProcessState)
	close(sh.exited)
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// read copies one output pipe into ch until the pipe fails (EOF, closed,
// or the drain deadline after the shell's death) or quit is closed.
func (sh *shell) read(f *os.File, ch chan<- []byte) {
	defer sh.readers.Done()
	defer close(ch)
	buf := make([]byte, readChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			select {
			case ch <- append([]byte(nil), buf[:n]...):
			case <-sh.quit:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (sh *shell) hasExited() bool {
	select {
	case <-sh.exited:
		return true
	default:
		return false
	}
}

// drainAfterExit bounds further reads once the shell is gone: what the
// shell wrote is already in the pipes, and a background job that outlived
// it must not hold the call open.
func (sh *shell) drainAfterExit() {
	sh.drainOnce.Do(func() {
		deadline := time.Now().Add(drainDelay)
		sh.outR.SetReadDeadline(deadline)
		sh.errR.SetReadDeadline(deadline)
	})
}

// kill ends the shell and everything it started, and waits (briefly) until
// they are gone. The shell is stopped first so that it cannot start new
// jobs while its descendants are found and killed. Then the processes
// carrying the shell's tag are killed too, which catches what
// double-forked out of the tree or outlived a shell that exited; each
// search runs twice to catch what was forked meanwhile.
func (sh *shell) kill() {
	var killed []int
	if !sh.hasExited() {
		sh.cmd.Process.Signal(syscall.SIGSTOP)
		for range 2 {
			groups, pids := commandTargets(sh.pid, nil, 0, true)
			signalTargets(groups, pids, syscall.SIGKILL)
			killed = append(killed, pids...)
			killed = append(killed, groups...)
		}
		syscall.Kill(-sh.pid, syscall.SIGKILL)
		sh.cmd.Process.Signal(syscall.SIGKILL)
		<-sh.exited
	}
	for range 2 {
		pids := tagged(sh.tag)
		signalTargets(nil, pids, syscall.SIGKILL)
		killed = append(killed, pids...)
	}
	waitDead(killed, killWait)
}

// close kills the shell if it still runs, waits for it and for the
// readers, and removes its files. It is safe to call more than once and
// from several goroutines; every caller returns once all is done.
func (sh *shell) close() {
	sh.closeOnce.Do(func() {
		sh.kill()
		<-sh.exited
		sh.idleMu.Lock()
		sh.closing = true
		id := sh.idle
		sh.idleMu.Unlock()
		close(sh.quit)
		if id != nil {
			<-id.done
		}
		sh.outR.Close()
		sh.errR.Close()
		sh.script.Close()
		sh.readers.Wait()
		os.RemoveAll(sh.dir)
	})
}

func (sh *shell) commandPath() string { return filepath.Join(sh.dir, "command") }
func (sh *shell) jobsPath() string    { return filepath.Join(sh.dir, "jobs") }

// writeCommand puts the command text where the protocol line sources it
// from, recreating the directory if a command removed it. Plain system
// calls keep this cheap: os.File would try the poller on a regular file.
func (sh *shell) writeCommand(command string) error {
	path := sh.commandPath()
	err := writeFile(path, command)
	if errors.Is(err, syscall.ENOENT) {
		if err = os.MkdirAll(sh.dir, 0o700); err == nil {
			err = writeFile(path, command)
		}
	}
	if err != nil {
		return fmt.Errorf("write command file: %w", err)
	}
	return nil
}

// jobs reads the process groups of the shell's jobs as the last call left
// them.
func (sh *shell) jobs() []int {
	b, _ := os.ReadFile(sh.jobsPath())
	var pgids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pgids = append(pgids, n)
		}
	}
	return pgids
}

// writeFile replaces the contents of path with text. It sets the size
// after writing rather than truncating first: cutting a file to zero
// frees its blocks and costs a journal update on every call.
func writeFile(path, text string) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	b := []byte(text)
	var off int64
	for len(b) > 0 {
		var n int
		if n, err = syscall.Pwrite(fd, b, off); err != nil {
			break
		}
		b, off = b[n:], off+int64(n)
	}
	if err == nil {
		err = syscall.Ftruncate(fd, off)
	}
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	return err
}
