package forward

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// Every call berth makes to a sandbox's agent has a deadline: a call
// answered whole is bounded as a whole (Bound), a stream by an idle
// timeout (WithIdle), since a stream may rightly last as long as it keeps
// moving. Root in a sandbox can stop its agent or take its socket and
// never answer; without a deadline such a call would hold its caller, and
// a slot of berth's, for as long as the caller waits. A call cut by its
// deadline fails with a gateway_timeout error naming the server and what
// timed out (Cut), and the forwarder closes the server's idle keep-alive
// connections, so the next call dials afresh rather than going out on a
// connection to an agent that no longer answers.

// cutCause is the cause a deadline puts on the context it cancels, so
// that Cut tells it from the caller going away.
type cutCause struct{ err error }

func (c *cutCause) Error() string { return c.err.Error() }
func (c *cutCause) Unwrap() error { return c.err }

// Bound returns ctx bounded by d for one call to serverID's agent doing
// what ("read_file", "a session command"); d <= 0 leaves ctx unbounded.
func Bound(ctx context.Context, serverID, what string, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, &cutCause{wire.Errorf(wire.CodeGatewayTimeout,
		"server %s: %s got no answer from the sandbox's agent within %s; the agent is hung or stopped", serverID, what, d)})
}

// Cut returns the gateway_timeout error of the deadline that ended ctx,
// or nil when ctx is live or ended otherwise (its caller went away).
func Cut(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	var c *cutCause
	if errors.As(context.Cause(ctx), &c) {
		return c.err
	}
	return nil
}

// CutOr returns Cut(ctx) when a deadline ended ctx, else err: what a
// call's failure is once its context may have been cut under it.
func CutOr(ctx context.Context, err error) error {
	if cut := Cut(ctx); cut != nil {
		return cut
	}
	return err
}

// Idle is the idle timeout of one stream to an agent: when no byte has
// moved for its duration, it cancels the stream's context with a
// gateway_timeout cause. Time spent waiting on the caller (reading what
// it sends, writing to it) does not count: a slow caller is not a hung
// agent. The zero of a nil *Idle does nothing, for streams without one.
type Idle struct {
	d      time.Duration
	start  time.Time
	last   atomic.Int64 // time since start of the last progress, in ns
	paused atomic.Int32
	timer  *time.Timer
	cancel context.CancelCauseFunc
	cause  error
}

// WithIdle returns ctx cancelled once the stream to serverID's agent
// doing what moves nothing for d, the Idle to report its progress to, and
// a function that ends both; d <= 0 gives no idle timeout (a nil *Idle).
func WithIdle(ctx context.Context, serverID, what string, d time.Duration) (context.Context, *Idle, context.CancelFunc) {
	if d <= 0 {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, nil, cancel
	}
	ctx, cancel := context.WithCancelCause(ctx)
	i := &Idle{d: d, start: time.Now(), cancel: cancel, cause: &cutCause{wire.Errorf(wire.CodeGatewayTimeout,
		"server %s: %s moved no data for %s; the sandbox's agent is hung or stopped", serverID, what, d)}}
	i.timer = time.AfterFunc(d, i.fire)
	return ctx, i, func() {
		i.timer.Stop()
		cancel(context.Canceled)
	}
}

// fire runs when the timer does: progress since it was set moves it on.
func (i *Idle) fire() {
	if i.paused.Load() > 0 {
		i.timer.Reset(i.d)
		return
	}
	if quiet := time.Since(i.start) - time.Duration(i.last.Load()); quiet < i.d {
		i.timer.Reset(i.d - quiet)
		return
	}
	i.cancel(i.cause)
}

// Touch records progress. It costs an atomic store, so it can be called
// on every read of a stream.
func (i *Idle) Touch() {
	if i != nil {
		i.last.Store(int64(time.Since(i.start)))
	}
}

// wait stops the clock while the stream waits on its caller; the
// returned function starts it again, as progress.
func (i *Idle) wait() func() {
	if i == nil {
		return func() {}
	}
	i.paused.Add(1)
	return func() {
		i.Touch()
		i.paused.Add(-1)
	}
}

// AgentBody reports every read of rc, a stream from the agent, as
// progress; an upgraded connection (a ReadWriteCloser, as ReverseProxy
// needs it) keeps its Write, whose bytes count too.
func (i *Idle) AgentBody(rc io.ReadCloser) io.ReadCloser {
	if i == nil || rc == nil {
		return rc
	}
	if rwc, ok := rc.(io.ReadWriteCloser); ok {
		return &idleConn{idleBody{rc, i}, rwc}
	}
	return idleBody{rc, i}
}

// CallerReader reads r, what the caller sends towards the agent; time
// spent waiting for the caller does not count. Closing it closes r when r
// can be closed.
func (i *Idle) CallerReader(r io.Reader) io.ReadCloser {
	if i == nil {
		if rc, ok := r.(io.ReadCloser); ok {
			return rc
		}
		return io.NopCloser(r)
	}
	return callerReader{r, i}
}

// CallerWriter writes to w, the caller; time spent waiting for the
// caller to take the bytes does not count.
func (i *Idle) CallerWriter(w io.Writer) io.Writer {
	if i == nil {
		return w
	}
	return callerWriter{w, i}
}

type idleBody struct {
	io.ReadCloser
	i *Idle
}

func (b idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.i.Touch()
	}
	return n, err
}

type idleConn struct {
	idleBody
	w io.Writer
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		c.i.Touch()
	}
	return n, err
}

type callerReader struct {
	r io.Reader
	i *Idle
}

func (c callerReader) Read(p []byte) (int, error) {
	defer c.i.wait()()
	return c.r.Read(p)
}

// Close closes the caller's body when it can be, so a transport that
// closes what it sends still does.
func (c callerReader) Close() error {
	if rc, ok := c.r.(io.Closer); ok {
		return rc.Close()
	}
	return nil
}

type callerWriter struct {
	w io.Writer
	i *Idle
}

func (c callerWriter) Write(p []byte) (int, error) {
	defer c.i.wait()()
	return c.w.Write(p)
}
