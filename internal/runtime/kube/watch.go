package kube

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-mcp/berth/internal/runtime"
)

// broadcast wakes everyone waiting for the next pod change: each waiter
// takes the current channel, and a change closes it and makes a new one.
type broadcast struct {
	mu       sync.Mutex
	ch       chan struct{}
	watchers []func(runtime.Exit)
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// next returns a channel closed at the next change. Take it before
// looking at the state, so a change in between is not missed.
func (b *broadcast) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) changed() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// Watch implements runtime.Watcher: a sandbox that was ready and whose pod
// ended or vanished is reported. A deletion berth asked for is reported
// too; the orchestrator ignores exits of servers it is stopping.
func (r *Runtime) Watch(ctx context.Context, fn func(runtime.Exit)) {
	r.changes.mu.Lock()
	idx := len(r.changes.watchers)
	r.changes.watchers = append(r.changes.watchers, fn)
	r.changes.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-r.stop:
		}
		r.changes.mu.Lock()
		r.changes.watchers[idx] = nil
		r.changes.mu.Unlock()
	}()
}

func (r *Runtime) exited(e runtime.Exit) {
	r.changes.mu.Lock()
	fns := make([]func(runtime.Exit), 0, len(r.changes.watchers))
	for _, fn := range r.changes.watchers {
		if fn != nil {
			fns = append(fns, fn)
		}
	}
	r.changes.mu.Unlock()
	r.log.Debug("sandbox pod ended", "server_id", e.ServerID, "reason", e.Reason)
	for _, fn := range fns {
		fn(e)
	}
}

// handler turns pod events into wake-ups and exits.
func (r *Runtime) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { r.changes.changed() },
		UpdateFunc: func(oldObj, newObj any) {
			r.changes.changed()
			old, ok1 := oldObj.(*corev1.Pod)
			cur, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 || cur.DeletionTimestamp != nil {
				return
			}
			if stateOf(old).State == runtime.StateReady && stateOf(cur).State == runtime.StateFailed {
				r.exited(runtime.Exit{ServerID: cur.Name, Reason: stateOf(cur).Message})
			}
		},
		DeleteFunc: func(obj any) {
			r.changes.changed()
			p, ok := obj.(*corev1.Pod)
			if !ok {
				if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
					p, ok = tomb.Obj.(*corev1.Pod)
				}
			}
			// berth's own deletions come here too; the orchestrator knows
			// the servers it is stopping and ignores their exits.
			if ok {
				r.exited(runtime.Exit{ServerID: p.Name, Reason: "its pod was deleted"})
			}
		},
	}
}
