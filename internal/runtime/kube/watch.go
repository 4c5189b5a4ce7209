package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

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

// Watch implements runtime.Watcher: a sandbox whose pod ended or vanished
// is reported. A deletion berth asked for is reported
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

// reportExit reports the sandbox of a pod that ended. A pod that ended
// Succeeded had its agent stopped by SIGTERM from the kubelet, which
// says why only in an event: an eviction past an emptyDir's size limit,
// say, whose Failed/Evicted status gives way to Succeeded when the
// container exits 0. That event is the exit's reason, looked up away
// from the informer's goroutine, for at most exitLookup.
func (r *Runtime) reportExit(p *corev1.Pod) {
	reason := stateOf(p).Message
	if p.Status.Phase != corev1.PodSucceeded {
		r.exited(runtime.Exit{ServerID: p.Name, Reason: reason})
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), exitLookup)
		defer cancel()
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if why := r.stopReason(ctx, p); why != "" {
			reason = why
		}
		r.exited(runtime.Exit{ServerID: p.Name, Reason: reason})
	}()
}

// exitLookup bounds the look for why the kubelet stopped a pod.
const exitLookup = 10 * time.Second

// stopReasons are the events in which a kubelet or the scheduler says
// it stopped a pod: an eviction (node pressure, an emptyDir past its
// size limit), a preemption, a node's shutdown. A readiness probe's
// failures, also warnings, are not why a pod stopped.
var stopReasons = map[string]bool{"Evicted": true, "Preempted": true, "Preempting": true, "NodeShutdown": true, "Terminated": true}

// stopReason is the newest of the pod's events that says why it was
// stopped, "" when it has none (or they cannot be read).
func (r *Runtime) stopReason(ctx context.Context, p *corev1.Pod) string {
	evs, err := r.podEvents(ctx, p)
	if err != nil {
		r.log.Debug("why the kubelet stopped a sandbox", "server_id", p.Name, "err", err)
		return ""
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if stopReasons[evs[i].Reason] {
			return fmt.Sprintf("its pod was stopped: %s: %s", evs[i].Reason, strings.TrimSpace(evs[i].Message))
		}
	}
	return ""
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
			// From ready, or from stopping (a pod whose sandbox stopped
			// cleanly, until the kubelet says why); a start that fails is
			// reported too, and the orchestrator leaves it to the start.
			if stateOf(old).State != runtime.StateFailed && stateOf(cur).State == runtime.StateFailed {
				r.reportExit(cur)
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
				if r.front != nil {
					r.front.podGone(p.Name, p.UID)
				}
				r.exited(runtime.Exit{ServerID: p.Name, Reason: "its pod was deleted"})
			}
		},
	}
}
