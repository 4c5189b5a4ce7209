package runtime_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/runtime"
)

// fake is a runtime with one optional capability (Watcher) whose Delete
// fails.
type fake struct{ watched bool }

func (*fake) Info() runtime.Info                                     { return runtime.Info{Name: "fake"} }
func (*fake) Create(context.Context, runtime.Spec) error             { return nil }
func (*fake) Status(context.Context, string) (runtime.Status, error) { return runtime.Status{}, nil }
func (*fake) Delete(context.Context, string) error                   { return errors.New("gone wrong") }
func (*fake) Logs(context.Context, string, int) (string, error)      { return "", nil }
func (*fake) List(context.Context) ([]string, error)                 { return nil, nil }
func (*fake) Close() error                                           { return nil }
func (*fake) WaitReady(context.Context, string) (runtime.Endpoint, error) {
	return runtime.Endpoint{}, nil
}
func (f *fake) Watch(context.Context, func(runtime.Exit)) { f.watched = true }

// Observed reports every call by method with its error, and hides no
// capability from As; As finds none the runtime lacks.
func TestObservedReportsCallsAndKeepsCapabilities(t *testing.T) {
	var calls []string
	hook := func(name string) observe.Start {
		return func(ctx context.Context) (context.Context, observe.Done) {
			return ctx, func(err error) { calls = append(calls, name+" "+errText(err)) }
		}
	}
	f := &fake{}
	rt := runtime.Observed(f, hook)
	ctx := context.Background()
	rt.Create(ctx, runtime.Spec{ServerID: "s"})
	rt.WaitReady(ctx, "s")
	rt.Status(ctx, "s")
	rt.Logs(ctx, "s", 10)
	rt.List(ctx)
	if err := rt.Delete(ctx, "s"); err == nil {
		t.Errorf("Delete's error was lost")
	}
	want := []string{"create ok", "wait_ready ok", "status ok", "logs ok", "list ok", "delete gone wrong"}
	if !slices.Equal(calls, want) {
		t.Errorf("observed %q, want %q", calls, want)
	}
	w, ok := runtime.As[runtime.Watcher](rt)
	if !ok {
		t.Fatal("the wrapped runtime's Watcher is not found")
	}
	w.Watch(ctx, nil)
	if !f.watched {
		t.Error("As returned a Watcher that is not the runtime's")
	}
	if _, ok := runtime.As[runtime.NodeHolder](rt); ok {
		t.Error("As found a NodeHolder the runtime does not have")
	}
	if runtime.Observed(f, nil) != runtime.Runtime(f) {
		t.Error("Observed with no hook wraps anyway")
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
