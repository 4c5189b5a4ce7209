package session

import (
	"context"
	"time"
)

// Run ends sessions that saw no call for the idle timeout. It sleeps until
// the earliest session could become idle, so it costs nothing between
// deadlines. When ctx ends it ends every session and returns.
func (m *Manager) Run(ctx context.Context) error {
	timer := time.NewTimer(m.opts.IdleTimeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return m.Reset(context.WithoutCancel(ctx))
		case <-timer.C:
			idle, next := m.takeIdle(time.Now())
			for _, sh := range idle {
				sh.close()
			}
			timer.Reset(next)
		}
	}
}

// takeIdle removes and marks ended the sessions idle at now, returning
// their shells to tear down and the wait until the next one may be idle.
// The check and the mark happen under the session's lock so that a call
// cannot begin in between.
func (m *Manager) takeIdle(now time.Time) ([]*shell, time.Duration) {
	idleFor := m.opts.IdleTimeout
	next := idleFor
	var shells []*shell
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, s := range m.sessions {
		s.mu.Lock()
		switch {
		case s.busy:
			// Can become idle no sooner than idleFor after it finishes.
		case now.Sub(s.lastUsed) >= idleFor:
			s.ended = true
			if s.sh != nil {
				shells = append(shells, s.sh)
			}
			delete(m.sessions, id)
		default:
			next = min(next, s.lastUsed.Add(idleFor).Sub(now))
		}
		s.mu.Unlock()
	}
	return shells, next
}
