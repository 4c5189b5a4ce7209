package session

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// Options configure a Manager. Zero values pick the documented defaults.
type Options struct {
	Workspace      string        // initial cwd of new shells
	Shell          string        // bash path; "" = "bash" on PATH
	Env            []string      // environment of new shells; nil = os.Environ()
	IdleTimeout    time.Duration // sessions unused this long are ended; 0 = 30m
	DefaultTimeout time.Duration // per call when the request gives none; 0 = 60s
	MaxTimeout     time.Duration // upper bound for a call's timeout; 0 = 1h
}

func (o Options) withDefaults() Options {
	if o.Shell == "" {
		o.Shell = "bash"
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = wire.DefaultSessionTimeoutSeconds * time.Second
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = wire.MaxSessionTimeoutSeconds * time.Second
	}
	if o.DefaultTimeout > o.MaxTimeout {
		o.DefaultTimeout = o.MaxTimeout
	}
	return o
}

// Manager owns the sessions of one agent. It is safe for concurrent use.
type Manager struct {
	opts Options

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

// NewManager returns a Manager with no sessions. Call Run to reap idle
// sessions and Close to end them all.
func NewManager(opts Options) *Manager {
	return &Manager{opts: opts.withDefaults(), sessions: make(map[string]*session)}
}

// ValidID reports whether id can name a session (wire.CheckSessionID).
func ValidID(id string) error { return wire.CheckSessionID(id) }

// Exec runs req.Command in session id, starting the session's shell if it
// has none. Calls on one session run one at a time, in turn; a waiting
// call gives up when ctx ends. A non-zero exit code or a timeout is a
// result, not an error.
func (m *Manager) Exec(ctx context.Context, id string, req wire.SessionExecRequest) (wire.BashResult, error) {
	if err := ValidID(id); err != nil {
		return wire.BashResult{}, err
	}
	timeout, limit, err := m.checkRequest(req)
	if err != nil {
		return wire.BashResult{}, err
	}
	replaced := false
	for {
		s, err := m.session(id)
		if err != nil {
			return wire.BashResult{}, err
		}
		if err := s.acquire(ctx); err != nil {
			return wire.BashResult{}, err
		}
		if !s.begin() {
			// Deleted or reaped while this call waited: the call runs
			// in a new session, which the caller learns from
			// session_reset.
			s.release()
			replaced = true
			continue
		}
		res, err := s.exec(ctx, m.opts, req.Command, timeout, limit)
		s.release()
		wire.FitOutput(&res, limit)
		res.SessionReset = res.SessionReset || replaced
		return res, err
	}
}

func (m *Manager) checkRequest(req wire.SessionExecRequest) (time.Duration, int64, error) {
	if err := req.Check(); err != nil {
		return 0, 0, err
	}
	timeout := m.opts.DefaultTimeout
	if t := req.Timeout; t > 0 {
		timeout = m.opts.MaxTimeout
		if t < m.opts.MaxTimeout.Seconds() {
			timeout = time.Duration(t * float64(time.Second))
		}
	}
	return timeout, req.MaxOutputBytes.Limit(wire.DefaultMaxOutputBytes), nil
}

// session returns the live session id, creating it if needed.
func (m *Manager) session(id string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, wire.Errorf(wire.CodeUnavailable, "session manager is closed")
	}
	s := m.sessions[id]
	if s == nil {
		s = newSession(id)
		m.sessions[id] = s
	}
	return s, nil
}

// Delete ends session id, killing its running command if there is one,
// and waits until its processes are gone. It does not stop half-way when
// ctx ends: ending is quick (SIGKILL), and a half-ended session would leak
// processes.
func (m *Manager) Delete(_ context.Context, id string) error {
	if err := ValidID(id); err != nil {
		return err
	}
	m.mu.Lock()
	s := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if s == nil {
		return wire.Errorf(wire.CodeNotFound, "session %s not found", id)
	}
	s.end()
	return nil
}

// List describes every session, sorted by id.
func (m *Manager) List() []wire.SessionInfo {
	m.mu.Lock()
	list := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		list = append(list, s)
	}
	m.mu.Unlock()
	infos := make([]wire.SessionInfo, 0, len(list))
	for _, s := range list {
		infos = append(infos, s.info())
	}
	slices.SortFunc(infos, func(a, b wire.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	return infos
}

// Reset ends every session and waits until their processes are gone; the
// manager stays usable. Like Delete it does not stop half-way when ctx
// ends.
func (m *Manager) Reset(_ context.Context) error {
	m.mu.Lock()
	all := m.sessions
	m.sessions = make(map[string]*session)
	m.mu.Unlock()
	endAll(all)
	return nil
}

// Close ends every session and refuses new calls. It returns once the
// shells and everything they started are gone.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return m.Reset(context.Background())
}

// endAll ends sessions in parallel, since each may have to wait for a
// killed command, and waits for all of them.
func endAll(sessions map[string]*session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(s.end)
	}
	wg.Wait()
}
