// Package opruns runs the commands berth asks for on behalf of an
// operation (run_bash_command, run_tests) apart from the request that
// asked, and keeps each one's answer until berth says it has recorded it.
//
// A berth replica that dies mid-command closes its connection; the
// command must not die with it, and the replica that takes the operation
// over must learn the real outcome of the one run instead of running the
// command again. So a run belongs to the table, not to a request: a
// request with a known operation id waits for that run (or answers its
// kept answer at once), and only an id the agent never saw starts one.
//
// Memory is bounded: at most MaxRuns runs (running, or ended and kept),
// at most MaxBytes of kept answers; an answer is released when berth
// acknowledges it (Release), when it has been kept for TTL, or, oldest
// first, when the bounds need the room. Whatever is let go without an
// acknowledgement leaves a mark, so that a later request for an unknown
// id that may have been among them is answered "outcome unknown" rather
// than run a second time; so does an agent younger than the operation.
package opruns

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// Defaults of Options.
const (
	DefaultMaxRuns  = 256
	DefaultMaxBytes = 64 << 20
	DefaultTTL      = time.Hour
)

// Options bound a Table; zero fields take the defaults.
type Options struct {
	MaxRuns  int
	MaxBytes int64
	TTL      time.Duration
	// Started is when the agent started (zero: when the table is made):
	// a takeover of an operation older than the agent is answered
	// "outcome unknown".
	Started time.Time
}

// Answer is an HTTP answer as the agent would have written it.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Table holds the runs of one agent.
type Table struct {
	opts    Options
	started time.Time // monotonic: the agent's age is what counts
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup

	mu   sync.Mutex
	runs map[string]*run
	kept int64 // bytes of the kept answers of ended runs
	// forgotSince is when the latest run this table let go of without
	// berth's acknowledgement was received; zero when none was.
	forgotSince time.Time
	lastSweep   time.Time
}

// run is one operation's command. answer is written once, before done is
// closed, and never changed: a run the table lets go of is replaced in
// the map, never altered, so a request that waits for it still gets it.
type run struct {
	received time.Time
	ended    time.Time // zero while it runs
	done     chan struct{}
	cancel   context.CancelFunc
	answer   Answer
	// note: the run stands for an answer the table did not keep (a
	// release that came first, an answer too large); it is no outcome to
	// mark as forgotten when it goes.
	note     bool
	released bool
}

// New returns an empty table whose runs live until Close.
func New(opts Options) *Table {
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	ctx, stop := context.WithCancel(context.Background())
	now := time.Now()
	started := opts.Started
	if started.IsZero() || started.After(now) {
		started = now
	}
	return &Table{opts: opts, started: started, ctx: ctx, stop: stop, runs: map[string]*run{}, lastSweep: now}
}

// Close ends every running command (as its context ending does: the
// command is terminated) and waits for the runs to end.
func (t *Table) Close() {
	t.stop()
	t.wg.Wait()
}

// Do answers the request for operation id: the answer of its run, started
// now with fn when the agent never saw id, waited for while it runs. age
// is how long ago berth recorded the operation when a replica takes it
// over (0 on the first attempt). The error is for a request that gets no
// answer of a run: ctx ended first (the run goes on), the outcome is
// unknown (conflict), or the table is full of running commands
// (unavailable).
func (t *Table) Do(ctx context.Context, id string, age time.Duration, fn func(context.Context) Answer) (Answer, error) {
	t.mu.Lock()
	now := time.Now()
	t.sweep(now)
	r, ok := t.runs[id]
	if !ok {
		if err := t.unknown(id, age, now); err != nil {
			t.mu.Unlock()
			return Answer{}, err
		}
		if !t.room(now) {
			t.mu.Unlock()
			return Answer{}, wire.Errorf(wire.CodeUnavailable, "the agent is running %d commands for berth operations, as many as it holds; retry when one ended", t.opts.MaxRuns)
		}
		runCtx, cancel := context.WithCancel(t.ctx)
		r = &run{received: now, done: make(chan struct{}), cancel: cancel}
		t.runs[id] = r
		t.wg.Add(1)
		go t.execute(runCtx, id, r, fn)
	}
	t.mu.Unlock()
	select {
	case <-r.done:
		return r.answer, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// unknown says why a request for an id the table does not hold must not
// start a run, or nil when it may: the first attempt, or a takeover of an
// operation this agent would hold if it had ever received it.
func (t *Table) unknown(id string, age time.Duration, now time.Time) error {
	if age <= 0 {
		return nil
	}
	if up := now.Sub(t.started); up < age {
		return wire.Errorf(wire.CodeConflict, "the agent restarted %s ago, after operation %s was asked for %s ago: whether its command ran, and how it ended, are unknown; check the server's state and run it again if that is safe",
			up.Round(time.Second), id, age.Round(time.Second))
	}
	if !t.forgotSince.IsZero() && now.Sub(t.forgotSince) < age {
		return wire.Errorf(wire.CodeConflict, "the agent let go of outcomes berth had not collected (kept for %s, at most %d commands and %d bytes) since operation %s was asked for: whether its command ran, and how it ended, are unknown; check the server's state and run it again if that is safe",
			t.opts.TTL, t.opts.MaxRuns, t.opts.MaxBytes, id)
	}
	return nil
}

func (t *Table) execute(ctx context.Context, id string, r *run, fn func(context.Context) Answer) {
	defer t.wg.Done()
	defer r.cancel()
	ans := fn(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	r.answer, r.ended = ans, time.Now()
	close(r.done)
	switch size := int64(len(ans.Body)); {
	case r.released:
		// Cancelled while it ran: nobody will ask for the answer, but a
		// late request for the id must not run the command again.
		t.runs[id] = noteRun(r.received, r.ended, wire.Errorf(wire.CodeConflict, "operation %s was cancelled while its command ran", id))
	case size > t.opts.MaxBytes:
		t.runs[id] = noteRun(r.received, r.ended, wire.Errorf(wire.CodeConflict,
			"operation %s's command ended with an answer of %d bytes, more than the %d the agent keeps: its outcome was not kept", id, size, t.opts.MaxBytes))
	default:
		t.kept += size
		t.evict()
	}
}

// Release lets go of operation id's answer: berth recorded it, or the
// operation was cancelled. A command still running is ended (as at its
// timeout). An id the table never saw is remembered as released, so that
// a request for it that arrives late does not run its command.
func (t *Table) Release(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	r, ok := t.runs[id]
	switch {
	case !ok:
		if t.room(now) {
			t.runs[id] = noteRun(now, now, wire.Errorf(wire.CodeConflict, "operation %s was cancelled before its command reached the agent", id))
		}
	case r.ended.IsZero():
		r.released = true
		r.cancel()
	default:
		t.drop(id, r, false)
	}
}

// noteRun is an ended run that answers err.
func noteRun(received, ended time.Time, err error) *run {
	d := wire.DetailOf(err)
	body, _ := wire.Marshal(wire.Error{Error: d})
	r := &run{received: received, ended: ended, done: make(chan struct{}), note: true,
		answer: Answer{Status: wire.StatusOf(d.Code), Header: http.Header{"Content-Type": {"application/json"}}, Body: body}}
	close(r.done)
	return r
}

// drop removes an ended run; forgotten marks one whose outcome berth
// never acknowledged.
func (t *Table) drop(id string, r *run, forgotten bool) {
	delete(t.runs, id)
	if r.note {
		return
	}
	t.kept -= int64(len(r.answer.Body))
	if forgotten && r.received.After(t.forgotSince) {
		t.forgotSince = r.received
	}
}

// sweep drops the ended runs kept longer than the TTL, looking at most
// once a tenth of it.
func (t *Table) sweep(now time.Time) {
	if now.Sub(t.lastSweep) < t.opts.TTL/10 {
		return
	}
	t.lastSweep = now
	for id, r := range t.runs {
		if !r.ended.IsZero() && now.Sub(r.ended) >= t.opts.TTL {
			t.drop(id, r, true)
		}
	}
}

// evict drops the oldest ended runs while the kept answers are over
// their bound.
func (t *Table) evict() {
	for t.kept > t.opts.MaxBytes {
		if !t.dropOldest() {
			return
		}
	}
}

// room makes room for one more run if it can (dropping the oldest ended
// one when the table is full) and reports whether there is.
func (t *Table) room(now time.Time) bool {
	if len(t.runs) < t.opts.MaxRuns {
		return true
	}
	t.lastSweep = time.Time{}
	t.sweep(now)
	return len(t.runs) < t.opts.MaxRuns || t.dropOldest()
}

// dropOldest drops the run that ended first, if any ended.
func (t *Table) dropOldest() bool {
	var oldest string
	var or *run
	for id, r := range t.runs {
		if !r.ended.IsZero() && (or == nil || r.ended.Before(or.ended)) {
			oldest, or = id, r
		}
	}
	if or == nil {
		return false
	}
	t.drop(oldest, or, true)
	return true
}

// Len is how many runs the table holds (running, kept, or notes).
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs)
}
