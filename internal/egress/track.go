package egress

import (
	"bufio"
	"net"
	"sync"
)

// tracker owns every goroutine and connection a Gateway starts, so that
// Serve can close them all and wait for the goroutines before it returns.
// Once shut down it refuses new ones: nothing is added after the wait
// begins.
type tracker struct {
	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
	wg     sync.WaitGroup
}

func newTracker() *tracker { return &tracker{conns: map[*trackedConn]struct{}{}} }

// goRun runs fn on a tracked goroutine, or reports false after shutdown.
func (t *tracker) goRun(fn func()) bool {
	if !t.enter() {
		return false
	}
	go func() {
		defer t.wg.Done()
		fn()
	}()
	return true
}

// enter counts the calling goroutine as tracked (for code net/http runs
// on its own goroutines); leave must follow. False after shutdown.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *tracker) leave() { t.wg.Done() }

// add tracks c until it is closed; client marks the sandbox's side, and
// onClose (may be nil) runs once when it is closed. After shutdown c is
// closed at once and add returns nil.
func (t *tracker) add(c net.Conn, client bool, onClose func()) *trackedConn {
	tc := &trackedConn{Conn: c, t: t, client: client, onClose: onClose}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		if onClose != nil {
			onClose()
		}
		return nil
	}
	t.conns[tc] = struct{}{}
	return tc
}

func (t *tracker) remove(tc *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, tc)
}

// closeConns closes the tracked connections, only the upstream ones
// when upstreamOnly (the byte limit cuts those; their tunnels then close
// the sandbox's side).
func (t *tracker) closeConns(upstreamOnly bool) {
	t.mu.Lock()
	var cs []*trackedConn
	for c := range t.conns {
		if !upstreamOnly || !c.client {
			cs = append(cs, c)
		}
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// shutdown refuses new goroutines and connections, closes every tracked
// connection, and waits for the tracked goroutines.
func (t *tracker) shutdown() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.closeConns(false)
	t.wg.Wait()
}

// trackedConn leaves its tracker when closed.
type trackedConn struct {
	net.Conn
	t      *tracker
	client bool
	once   sync.Once
	err    error
	// onClose gives back what the connection held (an accept slot).
	onClose func()
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.err = c.Conn.Close()
		c.t.remove(c)
		if c.onClose != nil {
			c.onClose()
		}
	})
	return c.err
}

// CloseWrite half-closes when the connection can, so a tunnel passes on
// an end of stream without ending the other direction.
func (c *trackedConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// peekedConn reads through the buffer that sniffed its first bytes.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *peekedConn) CloseWrite() error          { return closeWrite(c.Conn) }

// chanListener hands connections the gateway has sniffed as HTTP to an
// http.Server, so that header limits and timeouts are net/http's.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// hand gives c to the server, or closes it when the listener is closed.
func (l *chanListener) hand(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
