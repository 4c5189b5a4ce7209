package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// component is one control plane process (etcd, kube-apiserver, ...),
// alone in its process group so that stopping it stops whatever it
// started, and killed by the kernel if the test binary dies first.
type component struct {
	name string
	log  string // file holding its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // exit status; read after done
}

// startComponent runs path with args, logging to logPath.
func startComponent(name, path string, args []string, logPath string) (*component, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &component{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop ends the process group: SIGTERM, then SIGKILL after grace. It
// returns when the process has been reaped.
func (c *component) stop(grace time.Duration) {
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
	}
	// Also after a clean exit: children left in the group go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-c.done
}

// exited returns an error describing the process's exit, with its log's
// tail, for a component that stopped while it was expected to run.
func (c *component) exited() error {
	return fmt.Errorf("%s exited (%v); the end of its log %s:\n%s", c.name, c.err, c.log, tail(c.log, 30))
}

// waitReady calls probe until it returns nil, the process exits or ctx
// ends. Probing is the only way to learn a server is up: none of these
// components announces it.
func (c *component) waitReady(ctx context.Context, probe func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = probe(pctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-c.done:
			return c.exited()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last probe: %v); the end of its log %s:\n%s", c.name, ctx.Err(), last, c.log, tail(c.log, 30))
		case <-tick.C:
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errNotReady = errors.New("not ready")
