//go:build linux

// Package local runs each sandbox on this machine: the embedded default
// runtime. With full isolation (the default) a sandbox is a berth-agent
// under its own init in fresh user, mount, pid, network, IPC, UTS and
// cgroup namespaces (see package sandbox), as a block of host uids no
// other live sandbox has, in cgroups with memory, pids and CPU limits,
// with its workspace on a size-limited volume of its own. With isolation
// "none" the agent is a plain child process of berth's user, which the
// operator must ask for and is told about at every start.
//
// Every sandbox has a directory <data-dir>/servers/<id> that only berth
// can reach; the sandbox sees none of it. Agents outlive the orchestrator
// process, and a new orchestrator adopts them through their pid records,
// so a restart or crash loses no sandbox.
package local

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
)

func (l Limits) withDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = DefaultPids
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	return l
}

// Runtime is the local runtime. It is safe for concurrent use.
type Runtime struct {
	opts  Options
	log   *slog.Logger
	agent string
	// confine is the full isolation's host side; nil with IsolationNone.
	confine *confinement
	// egress runs the confined sandboxes' egress gateways; nil with
	// IsolationNone, whose sandboxes share the host's network.
	egress *egressHost
	space  *diskSpace
	mkfs   string
	// hostPaths matches paths under berth's directories, which errors
	// lose before they reach clients (see hideHostPaths).
	hostPaths *regexp.Regexp
	// owner names this runtime's sandboxes' owner (runtime.Owned).
	owner runtime.Owner
	// cache holds the OCI images sandboxes start from; nil with
	// IsolationNone, whose sandboxes cannot mount one.
	cache *image.Cache
	// agentStatic says the agent binary needs no libraries, so it runs
	// in any image.
	agentStatic bool
	// overlayByPath is set once the kernel refused overlayfs layers as
	// descriptors (before Linux 6.15): see overlay.go.
	overlayByPath atomic.Bool
	blankMu       sync.Mutex // serializes formatting blank volume images
	// tmplMu is held for reading while a template is copied into a new
	// workspace and for writing while a build replaces one.
	tmplMu sync.RWMutex

	mu       sync.Mutex
	locks    map[string]*sync.Mutex // per server id, serializes Create/Delete
	procs    map[string]*proc       // live or just-exited agents, by server id
	watchers []func(runtime.Exit)
	closed   chan struct{}
	// wakeR becomes readable when the runtime closes, waking the
	// goroutines that poll adopted processes' pidfds.
	wakeR, wakeW *os.File
}

var (
	_ runtime.Runtime = (*Runtime)(nil)
	_ runtime.Watcher = (*Runtime)(nil)
	_ runtime.Owned   = (*Runtime)(nil)
)

var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// New prepares the data directory, finds the agent binary and sets up the
// isolation the options ask for, proving it with a probe sandbox. It fails
// with what is missing and how to fix it rather than isolate less.
func New(opts Options) (*Runtime, error) {
	if opts.DataDir == "" {
		return nil, errors.New("local runtime: no data dir")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Isolation == "" {
		opts.Isolation = IsolationFull
	}
	if opts.Isolation != IsolationFull && opts.Isolation != IsolationNone {
		return nil, fmt.Errorf("local runtime: isolation %q: want %q or %q", opts.Isolation, IsolationFull, IsolationNone)
	}
	if opts.ReadOnlyPaths == nil {
		opts.ReadOnlyPaths = DefaultReadOnlyPaths
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.ImageRegistry != "" {
		opts.ImageRegistry = strings.TrimSuffix(opts.ImageRegistry, "/")
		if _, err := image.Normalize(opts.ImageRegistry + "/name:tag"); err != nil || image.IsLocal(opts.ImageRegistry+"/name") {
			return nil, fmt.Errorf("local runtime: image registry %q: want a repository prefix such as registry.example.com/berth", opts.ImageRegistry)
		}
	}
	if opts.Reserve == 0 {
		opts.Reserve = DefaultReserve
	}
	if opts.Reserve < 0 {
		return nil, fmt.Errorf("local runtime: data directory reserve %d: want a positive size", opts.Reserve)
	}
	if opts.SpaceCheckInterval <= 0 {
		opts.SpaceCheckInterval = DefaultSpaceCheckInterval
	}
	for _, p := range opts.ReadOnlyPaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" || p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
			return nil, fmt.Errorf("local runtime: read-only path %q: want a clean absolute path below / and outside /tmp (sandboxes get a /tmp of their own)", p)
		}
	}
	var hide []string
	for _, p := range opts.HidePaths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("local runtime: hide %q: %w", p, err)
		}
		hide = append(hide, abs)
	}
	opts.HidePaths = hide
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local runtime: data dir: %w", err)
	}
	opts.DataDir = abs
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	if err := mkdirPrivate(filepath.Join(abs, "servers"), 0o700); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	bin, err := findAgent(opts.AgentBinary)
	if err != nil {
		return nil, err
	}
	id, err := loadIdentity(abs)
	if err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	r := &Runtime{
		opts:   opts,
		owner:  ownerOf(id, abs),
		log:    opts.Logger,
		agent:  bin,
		locks:  map[string]*sync.Mutex{},
		procs:  map[string]*proc{},
		closed: make(chan struct{}),
		space:  &diskSpace{dir: abs, reserve: opts.Reserve, log: opts.Logger},
	}
	dirs := []string{abs, r.shortSocketDir()}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		dirs = append(dirs, real)
	}
	r.hostPaths = hostPathsPattern(dirs...)

	if opts.Isolation == IsolationFull {
		if r.mkfs, err = mkfsPath(); err != nil {
			return nil, r.refuse(err)
		}
		if r.confine, err = newConfinement(r); err != nil {
			return nil, r.refuse(err)
		}
		r.log.Info("local runtime isolation", "isolation", r.describe())
		r.egress = &egressHost{r: r, opts: opts.Egress, running: map[string]*egressRun{}}
		if r.cache, err = image.Open(image.Options{Dir: filepath.Join(abs, imageCacheDir), MaxBytes: opts.ImageCacheBytes,
			MaxImageEntries: opts.ImageMaxEntries, MaxImageBytes: opts.ImageMaxBytes, PlainHTTP: opts.PlainHTTPRegistries,
			Logger: opts.Logger}); err != nil {
			r.confine.release()
			return nil, fmt.Errorf("local runtime: %w", err)
		}
		if r.agentStatic, err = staticBinary(bin); err != nil {
			r.confine.release()
			r.cache.Close()
			return nil, fmt.Errorf("local runtime: agent binary: %w", err)
		}
		if !r.agentStatic {
			r.log.Warn("berth-agent is dynamically linked: sandboxes start from host, base and templates only, not from OCI images; build it with CGO_ENABLED=0 (make build does)", "agent", bin)
		}
		for _, p := range opts.ReadOnlyPaths {
			if abs == p || strings.HasPrefix(abs, p+"/") {
				r.log.Warn("the data directory lies under a path sandboxes see read-only: they see an empty directory in its place, and its path in their mount table; put it elsewhere (such as /var/lib/berth) to keep its path from them",
					"data_dir", abs, "read_only_path", p)
			}
		}
	} else {
		r.log.Warn("SANDBOXES RUN UNCONFINED: --isolation none makes each sandbox a plain process of berth's user, able to read berth's data, key and database", "isolation", r.describe())
	}
	if r.wakeR, r.wakeW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	r.adoptAll()
	r.reconcilePins()
	go r.watchSpace(opts.SpaceCheckInterval)
	return r, nil
}

// imageCacheDir is the image cache's directory in the data directory.
const imageCacheDir = "image-cache"

// reconcilePins makes the image cache's pins match the sandboxes there
// are: every sandbox of an image pins it (again: a pin lost with an
// older berth, or never written), so no eviction takes an image a
// sandbox will mount when it is made again; the pins of sandboxes that
// are gone (a crash between removing one and releasing its image) are
// released, so the cache can evict their images.
func (r *Runtime) reconcilePins() {
	if r.cache == nil {
		return
	}
	ids, err := r.List(context.Background())
	if err != nil {
		r.log.Warn("image pins", "err", err)
		return
	}
	for _, id := range ids {
		rec, err := r.readImageRecord(id)
		if err != nil {
			continue // of the host system, or not started yet
		}
		if err := r.cache.Pin(id, rec.Digest); err != nil {
			// Lost in a host crash: pulled again by digest when the
			// sandbox is made again.
			r.log.Warn("a sandbox's image is not in the cache", "server_id", id, "image", rec.Ref, "digest", rec.Digest, "err", err)
		}
	}
	for _, id := range r.cache.Holders() {
		if !validID.MatchString(id) {
			continue // not a sandbox: a name's latest build (see build.go)
		}
		if _, err := os.Lstat(r.dir(id)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := r.cache.Release(id); err != nil {
			r.log.Warn("release the image of a sandbox that is gone", "server_id", id, "err", err)
		}
	}
}

// staticBinary says whether the ELF executable at path loads no shared
// libraries (has no program interpreter).
func staticBinary(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// refuse explains a failed isolation set-up.
func (r *Runtime) refuse(err error) error {
	return fmt.Errorf("local runtime cannot isolate sandboxes: %w\nberth does not run sandboxes with less isolation than asked: fix the above, or pass --isolation none to run them unconfined as plain processes of berth's user", err)
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
	return runtime.Info{Name: "local", Isolation: r.describe(), Confined: r.confine != nil, Features: []string{"sessions", "files", "reuse"}}
}

// describe says in plain words what a sandbox can and cannot do.
func (r *Runtime) describe() string {
	if r.confine == nil {
		return "none: sandboxes run unconfined as plain processes of berth's user (--isolation none); they can read berth's data directory and key, reach its database and every other sandbox"
	}
	return r.confine.describe()
}

func (r *Runtime) dir(id string) string { return filepath.Join(r.opts.DataDir, "servers", id) }

// maxSocketPath is the longest unix socket path Linux accepts (108 bytes
// with the terminating NUL).
const maxSocketPath = 107

// socket is the path of a sandbox's agent socket: in its server
// directory when the path fits the unix socket limit, else in a private
// directory named after the data dir under the temp dir, so a deep data
// dir still works and the path stays the same for the next orchestrator.
// berth makes the socket and hands the agent the listening descriptor,
// so the directory needs no access for the sandbox.
func (r *Runtime) socket(id string) string {
	if p := filepath.Join(r.dir(id), "agent.sock"); len(p) <= maxSocketPath {
		return p
	}
	return filepath.Join(r.shortSocketDir(), id+".sock")
}

func (r *Runtime) shortSocketDir() string {
	sum := sha256.Sum256([]byte(r.opts.DataDir))
	return filepath.Join(os.TempDir(), "berth-"+hex.EncodeToString(sum[:6]))
}

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
// orchestrator adopts them. Close stops watching them.
func (r *Runtime) Close() error {
	if r.egress != nil {
		r.egress.stopAll()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
	default:
		close(r.closed)
		r.wakeW.Close()
		if r.confine != nil {
			r.confine.release()
		}
		if r.cache != nil {
			r.cache.Close()
		}
	}
	return nil
}
