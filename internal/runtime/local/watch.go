//go:build linux

package local

import (
	"context"
	"fmt"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Watch implements runtime.Watcher.
func (r *Runtime) Watch(ctx context.Context, fn func(runtime.Exit)) {
	r.mu.Lock()
	idx := len(r.watchers)
	r.watchers = append(r.watchers, fn)
	var dead []*proc
	for _, p := range r.procs {
		if p.foundDead {
			dead = append(dead, p)
		}
	}
	r.mu.Unlock()
	for _, p := range dead {
		fn(runtime.Exit{ServerID: p.id, Reason: r.exitReason(p)})
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-r.closed:
		}
		r.mu.Lock()
		r.watchers[idx] = nil
		r.mu.Unlock()
	}()
}

// exited tells the watchers about a sandbox that stopped by itself.
func (r *Runtime) exited(p *proc) {
	if r.egress != nil {
		r.egress.stop(p.id)
	}
	r.mu.Lock()
	if p.stopping || r.procs[p.id] != p {
		r.mu.Unlock()
		return
	}
	fns := make([]func(runtime.Exit), 0, len(r.watchers))
	for _, fn := range r.watchers {
		if fn != nil {
			fns = append(fns, fn)
		}
	}
	r.mu.Unlock()
	reason := r.exitReason(p)
	r.log.Warn("sandbox stopped by itself", "server_id", p.id, "reason", reason)
	for _, fn := range fns {
		fn(runtime.Exit{ServerID: p.id, Reason: reason})
	}
}

// exitReason says why a sandbox stopped: how its process ended, whether
// the kernel killed something for its memory limit, and the log's end.
func (r *Runtime) exitReason(p *proc) string {
	s := p.describe()
	if n := oomKills(p.Cgroups); n > 0 {
		s += fmt.Sprintf("; the kernel killed %d process(es) for exceeding the sandbox's memory limit", n)
	}
	return r.withoutHostPaths(s + ": " + r.tail(p.id, 5))
}

// adoptAll picks up the sandboxes of an earlier orchestrator on this data
// directory: running ones are watched, dead ones reported.
func (r *Runtime) adoptAll() {
	ids, err := r.List(context.Background())
	if err != nil {
		r.log.Error("adopt sandboxes", "err", err)
		return
	}
	for _, id := range ids {
		rec, err := r.readRecord(id)
		if err != nil {
			// Created but never started, or a record from an older berth.
			rec = record{}
		}
		p := r.adopt(id, rec)
		r.mu.Lock()
		r.procs[id] = p
		r.mu.Unlock()
		if p.foundDead {
			r.log.Warn("sandbox found not running", "server_id", id)
		} else {
			r.log.Info("adopted sandbox", "server_id", id, "pid", p.Pid)
		}
	}
}

// Pid returns the host pid of a running sandbox's top process (its init,
// or the agent of an unconfined sandbox), for operators and tests.
func (r *Runtime) Pid(id string) (int, bool) {
	p := r.proc(id)
	if p == nil || p.exited() {
		return 0, false
	}
	return p.Pid, true
}
