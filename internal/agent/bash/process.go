package bash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// drainDelay bounds how long output is still read once the command's
// process group is gone. Only a process that escaped the group (setsid)
// can hold the pipes open by then, and it must not hold the caller too.
const drainDelay = 500 * time.Millisecond

// Reads from an output pipe start small, since most commands print
// little, and grow while reads keep filling the buffer.
const (
	minReadChunk = 4 << 10
	maxReadChunk = 256 << 10
)

// pipes are the three pipes between the agent and bash: the command text
// on fd 3, stdout and stderr.
type pipes struct {
	scriptR, scriptW *os.File
	outR, outW       *os.File
	errR, errW       *os.File
}

func newPipes() (*pipes, error) {
	var p pipes
	var err error
	if p.scriptR, p.scriptW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("create command pipe: %w", err)
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.closeChild()
		p.closeParent()
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeChild()
		p.closeParent()
		return nil, fmt.Errorf("create stderr pipe: %w", err)
	}
	growPipe(p.outR)
	growPipe(p.errR)
	return &p, nil
}

// pipeSize is what output pipes are grown to: fewer, larger reads make
// streaming a noisy command cheaper. It is the default pipe-max-size.
const pipeSize = 1 << 20

// growPipe asks for a larger pipe buffer. It is only an optimisation, so
// failure (say, the per-user pipe memory quota is used up) is ignored.
func growPipe(f *os.File) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, pipeSize)
		})
	}
}

// closeChild closes the ends that belong to bash once it has them, so
// that EOF on the output pipes means every writer is gone.
func (p *pipes) closeChild() {
	closeAll(p.scriptR, p.outW, p.errW)
}

// closeParent closes the agent's ends. Closing twice is harmless.
func (p *pipes) closeParent() {
	closeAll(p.scriptW, p.outR, p.errR)
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// streams owns the goroutines that feed the command text to bash and
// collect its output.
type streams struct {
	p       *pipes
	writer  chan struct{}
	readers sync.WaitGroup
}

func (p *pipes) startIO(commands string, stdout, stderr io.Writer) *streams {
	s := &streams{p: p, writer: make(chan struct{})}
	go func() {
		defer close(s.writer)
		// A write error means bash stopped reading (it exited or was
		// killed); its result tells the caller what happened.
		if _, err := p.scriptW.WriteString(scriptPrefix); err == nil {
			p.scriptW.WriteString(commands)
		}
		p.scriptW.Close()
	}()
	s.readers.Add(2)
	go s.read(p.outR, stdout)
	go s.read(p.errR, stderr)
	return s
}

func (s *streams) read(f *os.File, b io.Writer) {
	defer s.readers.Done()
	buf := make([]byte, minReadChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			b.Write(buf[:n])
		}
		if err != nil {
			return
		}
		if n == len(buf) && len(buf) < maxReadChunk {
			buf = make([]byte, 2*len(buf))
		}
	}
}

// finish is called once the process group is gone. It reads what is left
// in the pipes for at most drainDelay, then closes them so that nothing
// stays blocked on a pipe held by an escaped process.
func (s *streams) finish() {
	drained := make(chan struct{})
	go func() {
		s.readers.Wait()
		close(drained)
	}()
	t := time.NewTimer(drainDelay)
	select {
	case <-drained:
		t.Stop()
	case <-t.C:
		s.p.outR.Close()
		s.p.errR.Close()
		<-drained
	}
	s.p.scriptW.Close()
	<-s.writer
}

// supervise waits for bash (pid, leader of its own process group) to exit
// or for the timeout or ctx to end it: then the group gets SIGTERM and,
// after grace, SIGKILL. Either way whatever is left of the group is
// killed once bash has exited, so background children do not outlive the
// call. Bash is not reaped here: while it is a zombie its process group
// ID cannot be reused, so the group kill cannot hit a stranger.
func supervise(ctx context.Context, pid int, timeout, grace time.Duration) (timedOut bool) {
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExited(pid)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		timedOut = true
	}
	if timedOut {
		syscall.Kill(-pid, syscall.SIGTERM)
		g := time.NewTimer(grace)
		select {
		case <-exited:
		case <-g.C:
		}
		g.Stop()
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	return timedOut
}

// waitExited blocks until pid has exited, without reaping it.
func waitExited(pid int) {
	const pPID = 1     // idtype_t P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if !errors.Is(e, syscall.EINTR) {
			return
		}
	}
}
