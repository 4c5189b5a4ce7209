package egresstest

import (
	"net"
	"sync"
)

// connSet is the open connections of a server, so that stopping it can
// close them all rather than wait for their clients.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{conns: map[net.Conn]struct{}{}} }

// add records c; false when the set is closed already (c must be closed
// by the caller).
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// closeAll aborts every connection (see trackedConn.abort) and refuses
// new ones.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(interface{ SetLinger(int) error }); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// trackListener records every connection it accepts in a connSet until
// the connection is closed.
type trackListener struct {
	net.Listener
	set *connSet
}

func (l trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	tracked := &trackedConn{TCPConn: tc, set: l.set}
	if !l.set.add(tracked) {
		tracked.abort()
		return nil, net.ErrClosed
	}
	return tracked, nil
}

// trackedConn is a TCP connection that leaves its set when closed. It
// keeps every method of *net.TCPConn (CloseWrite for http.Server's
// graceful close among them).
type trackedConn struct {
	*net.TCPConn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.remove(c)
	return c.TCPConn.Close()
}

// abort closes the connection with a reset, dropping what it had yet to
// send: a socket closed with unsent data to a peer that reads no more
// would live on for minutes retrying, and keep its namespace alive.
func (c *trackedConn) abort() {
	c.SetLinger(0)
	c.Close()
}
