package runtime

import (
	"context"

	"github.com/berth-mcp/berth/internal/observe"
)

// Observed wraps rt so that each call of the interface is reported to
// hook, bound by method name. The optional capabilities stay reachable
// through As (Unwrap), not a type assertion on the wrapper.
func Observed(rt Runtime, hook observe.Hook) Runtime {
	if hook == nil {
		return rt
	}
	return &observed{rt: rt,
		create: hook.Bind("create"), waitReady: hook.Bind("wait_ready"), status: hook.Bind("status"),
		delete: hook.Bind("delete"), logs: hook.Bind("logs"), list: hook.Bind("list")}
}

// Unwrapper is a runtime wrapping another (Observed).
type Unwrapper interface{ Unwrap() Runtime }

// As finds a capability (NodeHolder, Watcher, ...) on rt or the runtime
// it wraps.
func As[T any](rt Runtime) (T, bool) {
	for rt != nil {
		if t, ok := rt.(T); ok {
			return t, true
		}
		u, ok := rt.(Unwrapper)
		if !ok {
			break
		}
		rt = u.Unwrap()
	}
	var zero T
	return zero, false
}

type observed struct {
	rt                                            Runtime
	create, waitReady, status, delete, logs, list observe.Start
}

func (o *observed) Unwrap() Runtime { return o.rt }
func (o *observed) Info() Info      { return o.rt.Info() }
func (o *observed) Close() error    { return o.rt.Close() }

func (o *observed) Create(ctx context.Context, spec Spec) error {
	ctx, done := o.create(ctx)
	err := o.rt.Create(ctx, spec)
	done(err)
	return err
}

func (o *observed) WaitReady(ctx context.Context, serverID string) (Endpoint, error) {
	ctx, done := o.waitReady(ctx)
	ep, err := o.rt.WaitReady(ctx, serverID)
	done(err)
	return ep, err
}

func (o *observed) Status(ctx context.Context, serverID string) (Status, error) {
	ctx, done := o.status(ctx)
	st, err := o.rt.Status(ctx, serverID)
	done(err)
	return st, err
}

func (o *observed) Delete(ctx context.Context, serverID string) error {
	ctx, done := o.delete(ctx)
	err := o.rt.Delete(ctx, serverID)
	done(err)
	return err
}

func (o *observed) Logs(ctx context.Context, serverID string, tail int) (string, error) {
	ctx, done := o.logs(ctx)
	s, err := o.rt.Logs(ctx, serverID, tail)
	done(err)
	return s, err
}

func (o *observed) List(ctx context.Context) ([]string, error) {
	ctx, done := o.list(ctx)
	ids, err := o.rt.List(ctx)
	done(err)
	return ids, err
}
