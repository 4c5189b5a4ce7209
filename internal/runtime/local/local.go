// Package local runs each sandbox as a berth-agent child process on this
// machine: the embedded default runtime. Every sandbox gets a directory
// <data-dir>/servers/<id> holding its workspace, its agent's unix socket,
// token, pid file and log. Agents outlive the orchestrator process, and a
// new orchestrator adopts them through their pid files, so a restart or
// crash leaves no orphan and loses no sandbox.
package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Options configure the local runtime.
type Options struct {
	// DataDir holds servers/ (one directory per sandbox) and images/
	// (workspace templates named by image tag).
	DataDir string
	// AgentBinary is the berth-agent executable; "" looks next to the
	// running executable, then on PATH.
	AgentBinary string
	// Isolation is "auto" (use Linux namespaces when the kernel allows)
	// or "none".
	Isolation string
	Logger    *slog.Logger
}

// Runtime is the local runtime. It is safe for concurrent use.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	agent  string
	ns     namespaces
	mu     sync.Mutex
	locks  map[string]*sync.Mutex // per server id, serializes Create/Delete
	exited map[string]*child // agents this runtime started, by server id
}

var _ runtime.Runtime = (*Runtime)(nil)

var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// New prepares the data directory, finds the agent binary and probes
// which isolation the kernel allows.
func New(opts Options) (*Runtime, error) {
	if opts.DataDir == "" {
		return nil, errors.New("local runtime: no data dir")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Agents run from their workspace: every path handed to them must
	// be absolute.
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local runtime: data dir: %w", err)
	}
	opts.DataDir = abs
	// Traversable but not listable: each sandbox's own uid must reach its
	// directory without seeing the others.
	servers := filepath.Join(opts.DataDir, "servers")
	if err := os.MkdirAll(servers, 0o711); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	if err := os.Chmod(servers, 0o711); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	bin, err := findAgent(opts.AgentBinary)
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		opts:   opts,
		log:    opts.Logger,
		agent:  bin,
		locks:  map[string]*sync.Mutex{},
		exited: map[string]*child{},
	}
	r.ns = probeNamespaces(opts.Isolation, bin, servers)
	if r.ns.flags == 0 {
		r.log.Warn("local runtime cannot isolate sandboxes: they run as plain processes of this user", "why", r.ns.describe())
	} else {
		r.log.Info("local runtime isolation", "isolation", r.ns.describe())
	}
	return r, nil
}

func findAgent(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("agent binary: %w", err)
		}
		return filepath.Abs(explicit)
	}
	if self, err := os.Executable(); err == nil {
		cand := filepath.Join(filepath.Dir(self), "berth-agent")
		if _, err := os.Stat(cand); err == nil {
			return cand, nil
		}
	}
	if p, err := exec.LookPath("berth-agent"); err == nil {
		return filepath.Abs(p)
	}
	return "", errors.New("berth-agent binary not found next to berth or on PATH: run `make build` or pass --agent-binary")
}

// Info implements runtime.Runtime.
func (r *Runtime) Info() runtime.Info {
	return runtime.Info{Name: "local", Isolation: r.ns.describe(), Features: []string{"sessions", "files", "reuse"}}
}

func (r *Runtime) dir(id string) string { return filepath.Join(r.opts.DataDir, "servers", id) }

// maxSocketPath is the longest unix socket path Linux accepts (108 bytes
// with the terminating NUL).
const maxSocketPath = 107

// sockDir is the directory of a sandbox's agent socket: its own directory
// when the path fits the unix socket limit, else a directory named after
// the data dir and the id under the temp dir, so a deep data dir still
// works and the path stays the same for the next orchestrator.
func (r *Runtime) sockDir(id string) string {
	if len(filepath.Join(r.dir(id), "agent.sock")) <= maxSocketPath {
		return r.dir(id)
	}
	sum := sha256.Sum256([]byte(r.opts.DataDir))
	return filepath.Join(os.TempDir(), "berth-"+hex.EncodeToString(sum[:6]), id)
}

func (r *Runtime) socket(id string) string { return filepath.Join(r.sockDir(id), "agent.sock") }

func (r *Runtime) lock(id string) func() {
	r.mu.Lock()
	l, ok := r.locks[id]
	if !ok {
		l = &sync.Mutex{}
		r.locks[id] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func checkID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("invalid server id %q", id)
	}
	return nil
}

// List implements runtime.Runtime.
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.DataDir, "servers"))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validID.MatchString(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Close implements runtime.Runtime. Agents keep running: the next
// orchestrator adopts them.
func (r *Runtime) Close() error { return nil }

// alive reports whether the sandbox's recorded agent process runs, and
// its pid. A pid file whose process is gone, or whose pid was reused by an
// unrelated process, counts as not running.
func (r *Runtime) alive(id string) (int, bool) {
	// For an agent this runtime started, its waiter knows for sure.
	r.mu.Lock()
	c := r.exited[id]
	r.mu.Unlock()
	if c != nil {
		select {
		case <-c.done:
			return c.pid, false
		default:
			return c.pid, true
		}
	}
	b, err := os.ReadFile(filepath.Join(r.dir(id), "agent.pid"))
	if err != nil {
		return 0, false
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 {
		return 0, false
	}
	if syscall.Kill(pid, 0) != nil {
		return pid, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), r.socket(id)) {
		return pid, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie has exited; only its parent has not reaped it yet.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return pid, false
		}
	}
	return pid, true
}

// child is an agent process this runtime started and reaps: done closes
// when it exits, err then says how.
type child struct {
	pid  int
	done chan struct{}
	err  error
}

// exitedChild reports whether an agent this runtime started has exited,
// and how. For agents adopted from an earlier run it reports false: only
// their pid tells.
func (r *Runtime) exitedChild(id string) (bool, error) {
	r.mu.Lock()
	c := r.exited[id]
	r.mu.Unlock()
	if c == nil {
		return false, nil
	}
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}
