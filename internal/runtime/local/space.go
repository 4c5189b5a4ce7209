//go:build linux

package local

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// The data directory's filesystem holds every sandbox's volume, the
// templates, image builds' staging and berth's own files (often its
// embedded database too). Volumes are allocated whole when made, so what
// a sandbox writes into its own takes nothing more; everything berth
// makes there for a sandbox is first taken from the space above the
// reserve, and refused, naming the sizes, when it would leave less.

var (
	_ runtime.SpaceReporter = (*Runtime)(nil)
	_ runtime.DiskSizer     = (*Runtime)(nil)
)

// diskSpace guards the data directory's free space. It is safe for
// concurrent use.
type diskSpace struct {
	dir     string
	reserve int64
	log     *slog.Logger

	mu sync.Mutex
	// pending is what takes promised that the filesystem does not show
	// as used yet.
	pending int64
	low     bool // the state last logged
}

// unreserved guards the same filesystem keeping no reserve.
func (d *diskSpace) unreserved() *diskSpace {
	return &diskSpace{dir: d.dir, log: slog.New(slog.DiscardHandler)}
}

// free is what an unprivileged writer may still write on the data
// directory's filesystem (df's "Avail").
func (d *diskSpace) free() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.dir, &st); err != nil {
		return 0, fmt.Errorf("free space of the data directory: %w", err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// take promises need bytes to the caller, or refuses when they would
// leave less than the reserve free. The caller releases the promise once
// what it wrote shows as used (or it wrote nothing).
func (d *diskSpace) take(need int64, what string) (release func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, err := d.free()
	if err != nil {
		return nil, err
	}
	d.note(free)
	if free-d.pending-need < d.reserve {
		return nil, d.refusalLocked(free-d.pending, need, what)
	}
	d.pending += need
	return sync.OnceFunc(func() {
		d.mu.Lock()
		d.pending -= need
		d.mu.Unlock()
	}), nil
}

// check refuses as take would, promising nothing.
func (d *diskSpace) check(need int64, what string) error {
	release, err := d.take(need, what)
	if err == nil {
		release()
	}
	return err
}

// refusal is the error for need bytes the filesystem could not give.
func (d *diskSpace) refusal(need int64, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, _ := d.free()
	return d.refusalLocked(free-d.pending, need, what)
}

// refusalLocked names the sizes, never the data directory's path: the
// error reaches the sandbox's owner.
func (d *diskSpace) refusalLocked(free, need int64, what string) error {
	if free < d.reserve {
		return wire.Errorf(wire.CodeUnavailable, "not enough disk space for %s: berth's data directory has %s free, below the %s it keeps in reserve (--data-dir-reserve); no new sandbox starts until space is freed",
			what, runtime.FormatBytes(max(free, 0)), runtime.FormatBytes(d.reserve))
	}
	return wire.Errorf(wire.CodeUnavailable, "not enough disk space for %s: it needs %s, and berth's data directory has %s free and keeps %s of it in reserve (--data-dir-reserve) for berth and the sandboxes it runs",
		what, runtime.FormatBytes(need), runtime.FormatBytes(free), runtime.FormatBytes(d.reserve))
}

// state reads the free space and logs a change of state.
func (d *diskSpace) state() (runtime.Space, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	free, err := d.free()
	if err != nil {
		return runtime.Space{}, err
	}
	d.note(free)
	return runtime.Space{FreeBytes: free, ReserveBytes: d.reserve, Low: free < d.reserve}, nil
}

// note logs falling below the reserve and recovering, once each time.
// The caller holds d.mu.
func (d *diskSpace) note(free int64) {
	low := free < d.reserve
	if low == d.low {
		return
	}
	d.low = low
	if low {
		d.log.Warn("the data directory's free space is below its reserve: new sandboxes are refused until space is freed",
			"data_dir", d.dir, "free", runtime.FormatBytes(free), "reserve", runtime.FormatBytes(d.reserve))
		return
	}
	d.log.Info("the data directory's free space is above its reserve again: new sandboxes start",
		"data_dir", d.dir, "free", runtime.FormatBytes(free), "reserve", runtime.FormatBytes(d.reserve))
}

// watchSpace looks at the free space every interval until the runtime
// closes, so that crossing the reserve is logged when it happens, not at
// the next start.
func (r *Runtime) watchSpace(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.space.state(); err != nil {
			r.log.Warn("read the data directory's free space", "err", err)
		}
		select {
		case <-r.closed:
			return
		case <-t.C:
		}
	}
}

// Space implements runtime.SpaceReporter.
func (r *Runtime) Space(ctx context.Context) (runtime.Space, error) {
	return r.space.state()
}

// SandboxDisk implements runtime.DiskSizer: a confined sandbox takes its
// whole volume, allocated when it is made. An unconfined one has a plain
// directory in the data directory, bounded by nothing (0).
func (r *Runtime) SandboxDisk(runtime.Spec) int64 {
	if r.confine == nil {
		return 0
	}
	return r.opts.Limits.DiskBytes
}
