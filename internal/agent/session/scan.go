package session

import (
	"bytes"
	"io"

	"github.com/berth-mcp/berth/internal/agent/output"
)

// scanner passes one output stream to its sink until the call's end marker
// shows up. It holds back just enough bytes to find a marker split across
// reads, so output without a trailing newline arrives exactly and memory
// stays bounded whatever the command prints.
type scanner struct {
	marker  []byte
	sink    io.Writer
	pending []byte
	found   bool
	after   []byte // bytes that followed the marker
}

func newScanner(marker []byte, sink io.Writer) *scanner {
	return &scanner{marker: marker, sink: sink}
}

// feed consumes p; once the marker was found further bytes are kept in
// after.
func (s *scanner) feed(p []byte) {
	if s.found {
		s.after = append(s.after, p...)
		return
	}
	s.pending = append(s.pending, p...)
	if i := bytes.Index(s.pending, s.marker); i >= 0 {
		s.sink.Write(s.pending[:i])
		s.after = append(s.after, s.pending[i+len(s.marker):]...)
		s.pending = nil
		s.found = true
		return
	}
	keep := len(s.marker) - 1
	if n := len(s.pending) - keep; n > 0 {
		s.sink.Write(s.pending[:n])
		s.pending = append(s.pending[:0], s.pending[n:]...)
	}
}

// flush hands the held-back bytes to the sink when the stream ended
// without a marker.
func (s *scanner) flush() {
	if !s.found && len(s.pending) > 0 {
		s.sink.Write(s.pending)
		s.pending = nil
	}
}

// lazyBuffer is an output.Buffer made on the first write: a call that
// prints nothing to a stream, the common case for stderr, then costs no
// buffer at all.
type lazyBuffer struct {
	limit int64
	buf   *output.Buffer
}

func (l *lazyBuffer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.buf == nil {
		l.buf = output.NewBuffer(l.limit)
	}
	return l.buf.Write(p)
}

func (l *lazyBuffer) String() string {
	if l.buf == nil {
		return ""
	}
	return l.buf.String()
}

func (l *lazyBuffer) Omitted() int64 {
	if l.buf == nil {
		return 0
	}
	return l.buf.Omitted()
}
