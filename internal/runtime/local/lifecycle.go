//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
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
	if p := r.proc(id); p != nil && !p.exited() {
		return nil
	}
	if err := mkdirPrivate(r.dir(id), 0o700); err != nil {
		return r.hideHostPaths("create sandbox", id, fmt.Errorf("create sandbox %s: %w", id, err))
	}
	var p *proc
	img, err := r.ensureImage(ctx, spec)
	switch {
	case err != nil:
	case r.confine != nil:
		p, err = r.confine.start(id, spec, r.opts.Limits, false, img)
	default:
		p, err = r.startUnconfined(id, spec)
	}
	if err != nil {
		return r.hideHostPaths("create sandbox", id, fmt.Errorf("create sandbox %s: %w", id, err))
	}
	r.log.Info("sandbox started", "server_id", id, "pid", p.Pid)
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
// into it when such a template exists (host and base without one: an
// empty workspace).
func (r *Runtime) seedWorkspace(tag, ws string) error {
	r.tmplMu.RLock()
	defer r.tmplMu.RUnlock()
	if tmpl, ok := r.templateDir(tag); ok {
		if st, err := os.Stat(tmpl); err == nil && st.IsDir() {
			return copyTree(tmpl, ws)
		}
	}
	return os.Mkdir(ws, 0o755)
}

// proc returns the sandbox's tracked process, or nil.
func (r *Runtime) proc(id string) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}

// WaitReady implements runtime.Runtime by calling the agent's health
// endpoint until it answers. There is no event to wait on for a process
// opening a socket, so this polls, with a short growing interval; an
// agent that exits ends the wait at once.
func (r *Runtime) WaitReady(ctx context.Context, id string) (runtime.Endpoint, error) {
	if err := checkID(id); err != nil {
		return runtime.Endpoint{}, err
	}
	p := r.proc(id)
	if p == nil {
		return runtime.Endpoint{}, fmt.Errorf("sandbox %s does not exist", id)
	}
	ep := runtime.Endpoint{Network: "unix", Address: r.socket(id)}
	client := healthClient(ep.Address)
	defer client.CloseIdleConnections()
	wait := 5 * time.Millisecond
	for {
		if healthy(ctx, client) {
			if r.egress != nil {
				// The sandbox's loopback is up once its agent answers.
				if err := r.egress.serve(p); err != nil {
					return runtime.Endpoint{}, err
				}
			}
			return ep, nil
		}
		select {
		case <-ctx.Done():
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s not ready: %w", id, ctx.Err())
		case <-p.done:
			return runtime.Endpoint{}, fmt.Errorf("sandbox %s stopped before it became ready: %s", id, r.exitReason(p))
		case <-time.After(wait):
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
}

// readyCheckTimeout bounds one readiness check of an agent (WaitReady,
// Status): an agent that accepts and answers nothing fails it.
const readyCheckTimeout = 2 * time.Second

func healthClient(sock string) *http.Client {
	return &http.Client{
		Timeout: readyCheckTimeout,
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
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Status implements runtime.Runtime.
func (r *Runtime) Status(ctx context.Context, id string) (runtime.Status, error) {
	if err := checkID(id); err != nil {
		return runtime.Status{}, err
	}
	if _, err := os.Lstat(r.dir(id)); errors.Is(err, os.ErrNotExist) {
		return runtime.Status{State: runtime.StateGone}, nil
	}
	ep := runtime.Endpoint{Network: "unix", Address: r.socket(id)}
	p := r.proc(id)
	if p == nil {
		return runtime.Status{State: runtime.StateFailed, Message: "sandbox is not running", Endpoint: ep}, nil
	}
	if p.exited() {
		return runtime.Status{State: runtime.StateFailed, Message: r.exitReason(p), Endpoint: ep}, nil
	}
	c := healthClient(ep.Address)
	defer c.CloseIdleConnections()
	if healthy(ctx, c) {
		return runtime.Status{State: runtime.StateReady, Endpoint: ep}, nil
	}
	return runtime.Status{State: runtime.StatePending, Message: "agent not answering yet", Endpoint: ep}, nil
}

// Delete implements runtime.Runtime: stop the sandbox, then remove its
// cgroups, volume, uid block and directory.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	unlock := r.lock(id)
	defer unlock()
	return r.hideHostPaths("delete sandbox", id, r.removeSandbox(ctx, id))
}

// Stop implements runtime.Stopper: the sandbox's processes end (its init
// and with it everything in its pid namespace), while its directory,
// volume and record stay for Create to start it again. Its exit is not
// reported to the watchers: it was asked for.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	unlock := r.lock(id)
	defer unlock()
	return r.stop(ctx, id)
}

func (r *Runtime) removeSandbox(ctx context.Context, id string) error {
	dir := r.dir(id)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		r.forget(id)
		// Deleted by an earlier call that failed to release it.
		return r.releaseImage(id)
	}
	if err := r.stop(ctx, id); err != nil {
		return err
	}
	rec, err := r.readRecord(id)
	if err != nil && r.confine != nil {
		// Created and stopped before its record was written: its groups
		// are where this berth makes them.
		rec.Cgroups = r.confine.cgroup.dirs(id)
	}
	if err := r.emptyCgroups(ctx, rec.Cgroups); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	mnt := filepath.Join(dir, volumeDir)
	if err := unmount(mnt); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	// Never walk a mounted volume: its tree is the sandbox's.
	if mounted, err := isMountPoint(mnt); err == nil && mounted {
		return fmt.Errorf("delete sandbox %s: its volume is still mounted at %s", id, mnt)
	}
	if c := r.confine; c != nil {
		if err := c.uids.release(dir); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if sock := r.socket(id); filepath.Dir(sock) != dir {
		os.Remove(sock)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	r.forget(id)
	if err := r.releaseImage(id); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return nil
}

func (r *Runtime) forget(id string) {
	r.mu.Lock()
	delete(r.procs, id)
	r.mu.Unlock()
}

// stop ends the sandbox's processes: SIGTERM to its top process (which
// passes it to the agent), SIGKILL after a grace period. A confined
// sandbox's processes all die with its init; an unconfined one's process
// group is signalled.
func (r *Runtime) stop(ctx context.Context, id string) error {
	p := r.proc(id)
	if p == nil || p.exited() {
		return nil
	}
	r.mu.Lock()
	p.stopping = true
	r.mu.Unlock()
	if r.egress != nil {
		defer r.egress.stop(id)
	}
	target := p.Pid
	if r.opts.Isolation == IsolationNone {
		target = -p.Pid
	}
	syscall.Kill(target, syscall.SIGTERM)
	if r.waitExit(ctx, p, 10*time.Second) {
		return nil
	}
	syscall.Kill(target, syscall.SIGKILL)
	if r.waitExit(ctx, p, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("delete sandbox %s: pid %d survived SIGKILL", id, p.Pid)
}

// waitExit waits up to limit for p to exit. After Close, adopted
// processes are no longer watched, so their pid is checked instead.
func (r *Runtime) waitExit(ctx context.Context, p *proc, limit time.Duration) bool {
	deadline := time.After(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return true
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
			if !p.own && !r.running(p) {
				return true
			}
		}
	}
}

// emptyCgroups makes sure nothing is left in a sandbox's cgroups and
// removes them. With a pid namespace nothing should be; a process that is
// there anyway is killed.
func (r *Runtime) emptyCgroups(ctx context.Context, dirs []string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := cgroupPids(dirs)
		if len(pids) == 0 {
			return removeCgroups(dirs)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survive in the sandbox's cgroups", pids)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Logs implements runtime.Runtime.
func (r *Runtime) Logs(ctx context.Context, id string, tail int) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	b, err := readTail(r.logPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("logs of sandbox %s: %w", id, os.ErrNotExist)
	}
	if err != nil {
		return "", r.hideHostPaths("read logs", id, fmt.Errorf("logs of sandbox %s: %w", id, err))
	}
	return lastLines(string(b), tail), nil
}

// maxLogTail bounds how much of a log is read to find its last lines: a
// long-lived sandbox's log may be large.
const maxLogTail = 1 << 20

// readTail reads at most the last maxLogTail bytes of a log, never
// following a symlink.
func readTail(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if off := st.Size() - maxLogTail; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, maxLogTail))
}

func (r *Runtime) tail(id string, n int) string {
	b, _ := readTail(r.logPath(id))
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
