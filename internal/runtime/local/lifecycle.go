package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Create implements runtime.Runtime. The workspace is kept when it exists,
// so that re-creating a sandbox after its agent died keeps its files; a
// fresh filesystem takes a Delete first.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) error {
	if err := checkID(spec.ServerID); err != nil {
		return err
	}
	unlock := r.lock(spec.ServerID)
	defer unlock()
	id := spec.ServerID
	if _, ok := r.alive(id); ok {
		return nil
	}
	dir := r.dir(id)
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create sandbox %s: %w", id, err)
	}
	if _, err := os.Stat(ws); errors.Is(err, os.ErrNotExist) {
		if err := r.seedWorkspace(spec.ImageTag, ws); err != nil {
			return fmt.Errorf("create sandbox %s: %w", id, err)
		}
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(spec.AgentToken+"\n"), 0o600); err != nil {
		return fmt.Errorf("create sandbox %s: write token: %w", id, err)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", id, err)
	}
	defer logFile.Close()
	if sd := r.sockDir(id); sd != dir {
		// The shared parent must be traversable by every sandbox's uid;
		// each sandbox's own directory is private to it.
		if err := os.MkdirAll(filepath.Dir(sd), 0o711); err != nil {
			return fmt.Errorf("create sandbox %s: socket dir: %w", id, err)
		}
		if err := os.Chmod(filepath.Dir(sd), 0o711); err != nil {
			return fmt.Errorf("create sandbox %s: socket dir: %w", id, err)
		}
		if err := os.MkdirAll(sd, 0o700); err != nil {
			return fmt.Errorf("create sandbox %s: socket dir: %w", id, err)
		}
		if err := r.ns.prepareDir(id, sd); err != nil {
			return fmt.Errorf("create sandbox %s: %w", id, err)
		}
	}
	if err := r.ns.prepare(id, dir, ws, tokenFile); err != nil {
		return fmt.Errorf("create sandbox %s: %w", id, err)
	}

	cmd := exec.Command(r.agent,
		"--listen", "unix:"+r.socket(id),
		"--workspace", ws,
		"--token-file", tokenFile,
		"--isolation", r.ns.describe(),
	)
	cmd.Dir = ws
	cmd.Env = sandboxEnv(ws, spec.Env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own session: the agent must not die with the orchestrator's
	// terminal or process group, and Delete signals the whole group.
	cmd.SysProcAttr = r.ns.sysProcAttr(id)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("create sandbox %s: start agent: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("create sandbox %s: write pid file: %w", id, err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	r.mu.Lock()
	r.exited[id] = c
	r.mu.Unlock()
	// The waiter reaps the child so it never lingers as a zombie; it ends
	// when the agent exits.
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	r.log.Info("sandbox agent started", "server_id", id, "pid", cmd.Process.Pid)
	return nil
}

// sandboxEnv is the environment of a sandbox: a small fixed base plus the
// caller's variables, never the orchestrator's own environment (which may
// hold database credentials).
func sandboxEnv(ws string, extra map[string]string) []string {
	env := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": ws,
		"LANG": "C.UTF-8",
		"TERM": "dumb",
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// seedWorkspace creates the workspace, copying <data-dir>/images/<tag>
// into it when such a template exists.
func (r *Runtime) seedWorkspace(tag, ws string) error {
	tmpl := filepath.Join(r.opts.DataDir, "images", tag)
	if tag != "" && !strings.Contains(tag, "..") && !strings.ContainsRune(tag, '/') {
		if st, err := os.Stat(tmpl); err == nil && st.IsDir() {
			return copyTree(tmpl, ws)
		}
	}
	return os.Mkdir(ws, 0o755)
}

// WaitReady implements runtime.Runtime by calling the agent's health
// endpoint until it answers. There is no event to wait on for a process
// opening a socket, so this polls, with a short growing interval.
func (r *Runtime) WaitReady(ctx context.Context, id string) (runtime.Endpoint, error) {
	if err := checkID(id); err != nil {
		return runtime.Endpoint{}, err
	}
	ep := runtime.Endpoint{Network: "unix", Address: r.socket(id)}
	client := healthClient(ep.Address)
	defer client.CloseIdleConnections()
	wait := 5 * time.Millisecond
	for {
		if healthy(ctx, client) {
			return ep, nil
		}
		if dead, how := r.exitedChild(id); dead {
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s: agent exited before it became ready (%v): %s", id, how, r.tail(id, 5))
		}
		if _, ok := r.alive(id); !ok {
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s: agent exited before it became ready: %s", id, r.tail(id, 5))
		}
		select {
		case <-ctx.Done():
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s not ready: %w", id, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
}

func healthClient(sock string) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}
}

func healthy(ctx context.Context, c *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/api/health", nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Status implements runtime.Runtime.
func (r *Runtime) Status(ctx context.Context, id string) (runtime.Status, error) {
	if err := checkID(id); err != nil {
		return runtime.Status{}, err
	}
	if _, err := os.Stat(r.dir(id)); errors.Is(err, os.ErrNotExist) {
		return runtime.Status{State: runtime.StateGone}, nil
	}
	ep := runtime.Endpoint{Network: "unix", Address: r.socket(id)}
	if _, ok := r.alive(id); !ok {
		return runtime.Status{State: runtime.StateFailed, Message: "agent is not running: " + r.tail(id, 3), Endpoint: ep}, nil
	}
	c := healthClient(ep.Address)
	defer c.CloseIdleConnections()
	if healthy(ctx, c) {
		return runtime.Status{State: runtime.StateReady, Endpoint: ep}, nil
	}
	return runtime.Status{State: runtime.StatePending, Message: "agent not answering yet", Endpoint: ep}, nil
}

// Delete implements runtime.Runtime: SIGTERM the agent's process group,
// SIGKILL it after a grace period, then remove the sandbox directory.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	unlock := r.lock(id)
	defer unlock()
	if err := r.stop(ctx, id); err != nil {
		return err
	}
	if sd := r.sockDir(id); sd != r.dir(id) {
		if err := os.RemoveAll(sd); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if err := os.RemoveAll(r.dir(id)); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	r.mu.Lock()
	delete(r.exited, id)
	r.mu.Unlock()
	return nil
}

func (r *Runtime) stop(ctx context.Context, id string) error {
	pid, ok := r.alive(id)
	if !ok {
		return nil
	}
	r.mu.Lock()
	var exited chan struct{}
	if c := r.exited[id]; c != nil {
		exited = c.done
	}
	r.mu.Unlock()
	syscall.Kill(-pid, syscall.SIGTERM)
	if r.waitGone(ctx, id, exited, 10*time.Second) {
		return nil
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	if r.waitGone(ctx, id, exited, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("delete sandbox %s: agent pid %d survived SIGKILL", id, pid)
}

// waitGone waits for the agent to exit: on the waiter's channel for our
// own children, by checking the pid for adopted ones.
func (r *Runtime) waitGone(ctx context.Context, id string, exited chan struct{}, limit time.Duration) bool {
	deadline := time.After(limit)
	if exited != nil {
		select {
		case <-exited:
			return true
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	for {
		if _, ok := r.alive(id); !ok {
			return true
		}
		select {
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Logs implements runtime.Runtime.
func (r *Runtime) Logs(ctx context.Context, id string, tail int) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	b, err := readTail(filepath.Join(r.dir(id), "agent.log"))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, os.ErrNotExist)
	}
	if err != nil {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, err)
	}
	return lastLines(string(b), tail), nil
}

// maxLogTail bounds how much of a log is read to find its last lines: a
// long-lived sandbox's log may be large.
const maxLogTail = 1 << 20

// readTail reads at most the last maxLogTail bytes of a file.
func readTail(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := st.Size() - maxLogTail; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, maxLogTail))
}

func (r *Runtime) tail(id string, n int) string {
	b, _ := readTail(filepath.Join(r.dir(id), "agent.log"))
	s := strings.TrimSpace(lastLines(string(b), n))
	if s == "" {
		return "(no log output)"
	}
	return s
}

func lastLines(s string, n int) string {
	if n <= 0 {
		return s
	}
	s = strings.TrimSuffix(s, "\n")
	idx := len(s)
	for i := 0; i < n; i++ {
		j := strings.LastIndexByte(s[:idx], '\n')
		if j < 0 {
			return s + "\n"
		}
		idx = j
	}
	return s[idx+1:] + "\n"
}
