// Package servetest runs the real `berth serve` binary for tests: it
// starts the command a test built, waits for the line that says where it
// serves, keeps its stderr for the test's messages, and stops it when the
// test ends (SIGTERM, as an operator would; SIGKILL and a test error if it
// has not stopped within a minute).
package servetest

import (
	"bufio"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/syncbuf"
)

// Process is a running `berth serve`.
type Process struct {
	Cmd *exec.Cmd
	// URL is where it serves, from its "berth is serving on" line.
	URL string
	// Log is what it wrote to stderr.
	Log *syncbuf.Buffer

	done    chan struct{} // closed when it exited
	waitErr error         // how, once done is closed
}

// Wait waits for the process to exit and returns how it did (the
// process is waited for once, here; never call Cmd.Wait).
func (p *Process) Wait() error {
	<-p.done
	return p.waitErr
}

var serving = regexp.MustCompile(`berth is serving on (http://\S+)`)

// Start starts cmd (a `berth serve` command line; its Stderr must be
// unset) and waits up to startTimeout for it to say where it serves.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start berth serve: %v", err)
	}
	p := &Process{Cmd: cmd, Log: &syncbuf.Buffer{}, done: make(chan struct{})}
	done := p.done
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.Log.Write([]byte(sc.Text() + "\n"))
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { p.waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
			t.Errorf("berth serve did not stop within a minute of SIGTERM:\n%s", p.Log.String())
		}
	})
	select {
	case p.URL = <-urls:
		return p
	case <-done:
		t.Fatalf("berth serve exited before serving:\n%s", p.Log.String())
	case <-time.After(startTimeout):
		t.Fatalf("berth serve did not start within %s:\n%s", startTimeout, p.Log.String())
	}
	return nil
}

// startTimeout bounds a start: a first start initialises an embedded
// database, on a busy machine.
const startTimeout = 3 * time.Minute
