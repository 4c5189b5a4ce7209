package session

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// session is one session id: its current shell (started on demand and
// again after it died) and its bookkeeping.
type session struct {
	id  string
	sem chan struct{} // held by the call that runs; waiting callers queue on it

	mu       sync.Mutex
	sh       *shell // nil before the first call and after the shell died
	started  bool   // a shell ran before, so a new one means lost state
	ended    bool   // deleted, reaped or reset; no call may start
	busy     bool
	calls    int64
	created  time.Time
	lastUsed time.Time
}

func newSession(id string) *session {
	now := time.Now()
	return &session{id: id, sem: make(chan struct{}, 1), created: now, lastUsed: now}
}

// acquire waits for the session's turn, giving up when ctx ends.
func (s *session) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for session %s: %w", s.id, ctx.Err())
	}
}

func (s *session) release() { <-s.sem }

// begin marks the session busy unless it was ended meanwhile. Checking
// and marking under one lock keeps the reaper from ending a session a
// call is about to use.
func (s *session) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.busy = true
	s.calls++
	s.lastUsed = time.Now()
	return true
}

func (s *session) finish() {
	s.mu.Lock()
	s.busy = false
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// exec runs one command; the caller holds the session's turn and has
// called begin.
func (s *session) exec(ctx context.Context, opts Options, command string, timeout time.Duration, limit int64) (wire.BashResult, error) {
	defer s.finish()
	s.mu.Lock()
	sh := s.sh
	s.mu.Unlock()
	if sh != nil && sh.hasExited() {
		// Died between calls (killed from outside, or by its own
		// background job).
		s.retire(sh)
		sh = nil
	}
	reset := false
	if sh == nil {
		var err error
		if sh, err = startShell(opts); err != nil {
			return wire.BashResult{}, fmt.Errorf("session %s: %w", s.id, err)
		}
		s.mu.Lock()
		if s.ended {
			s.mu.Unlock()
			sh.close()
			return wire.BashResult{}, wire.Errorf(wire.CodeConflict, "session %s was ended", s.id)
		}
		s.sh = sh
		reset = s.started
		s.started = true
		s.mu.Unlock()
	}
	out, err := sh.run(ctx, command, timeout, limit)
	out.res.SessionReset = reset
	if out.died {
		s.retire(sh)
		s.mu.Lock()
		ended := s.ended
		s.mu.Unlock()
		if ended {
			return out.res, wire.Errorf(wire.CodeConflict, "session %s was ended while the command ran", s.id)
		}
	}
	if err != nil {
		return out.res, fmt.Errorf("session %s: %w", s.id, err)
	}
	return out.res, nil
}

// retire cleans up a shell that died and forgets it, so the next call
// starts a new one.
func (s *session) retire(sh *shell) {
	sh.close()
	s.mu.Lock()
	if s.sh == sh {
		s.sh = nil
	}
	s.mu.Unlock()
}

// markEnded stops new calls and hands back the shell to tear down; nil if
// there is none or the session was already ended.
func (s *session) markEnded() *shell {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	s.ended = true
	return s.sh
}

// end kills the session's shell, its running command and its jobs, and
// waits until they are gone. It takes no context: SIGKILL makes it quick,
// and a session taken out of the manager must not be left half ended.
func (s *session) end() {
	if sh := s.markEnded(); sh != nil {
		sh.close()
	}
}

func (s *session) info() wire.SessionInfo {
	s.mu.Lock()
	inf := wire.SessionInfo{
		ID:        s.id,
		CreatedAt: s.created.UTC().Format(time.RFC3339),
		LastUsed:  s.lastUsed.UTC().Format(time.RFC3339),
		Busy:      s.busy,
		Calls:     s.calls,
	}
	sh := s.sh
	s.mu.Unlock()
	if sh != nil && !sh.hasExited() {
		inf.PID = sh.pid
		if cwd, err := os.Readlink("/proc/" + strconv.Itoa(sh.pid) + "/cwd"); err == nil {
			inf.Cwd = cwd
		}
	}
	return inf
}
