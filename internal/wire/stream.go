package wire

import (
	"unicode/utf8"
)

// ExecEvent is one line of a streamed command's NDJSON answer (the
// agent's POST /api/tools/bash/stream and berth's
// POST /api/servers/{server_id}/exec/stream). Output events carry Stream
// ("stdout" or "stderr") and Data, in the order the command wrote them;
// the last event carries ExitCode (always present on it) and the rest of
// the result, or Error when the command could not be run to its end.
type ExecEvent struct {
	Stream string `json:"stream,omitempty"`
	Data   string `json:"data,omitempty"`

	ExitCode             *int  `json:"exit_code,omitempty"`
	TimedOut             bool  `json:"timed_out,omitempty"`
	Truncated            bool  `json:"truncated,omitempty"`
	DurationMS           int64 `json:"duration_ms,omitempty"`
	StdoutTruncatedBytes int64 `json:"stdout_truncated_bytes,omitempty"`
	StderrTruncatedBytes int64 `json:"stderr_truncated_bytes,omitempty"`
	// EgressRefused is set by berth on the final event, as on
	// BashResult.
	EgressRefused []string `json:"egress_refused,omitempty"`

	Error *ErrorDetail `json:"error,omitempty"`
}

// Stream names of ExecEvent.Stream.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// NDJSONType is the media type of a streamed command's answer.
const NDJSONType = "application/x-ndjson"

// Final reports whether e ends the stream.
func (e ExecEvent) Final() bool { return e.ExitCode != nil || e.Error != nil }

// OutputStream applies a BashResult's caps to output as it is written:
// the head (half the limit, in bytes as decoded and in JSON text, as
// FitOutput counts them) passes through at once; past it, only the
// latest bytes are kept, and Close returns the marker naming what was
// omitted and that tail. The pieces Write and Close return, joined, are
// what FitOutput would have kept of the whole output, so a client sees
// how a command starts as it starts, and how it ended, in bounded
// memory whatever the command prints. A negative limit passes all.
type OutputStream struct {
	limit   int64
	head    budget
	pending []byte // an incomplete UTF-8 character split across writes
	inTail  bool
	tail    []byte // the latest bytes past the head, at most 2*tailCap
	total   int64  // bytes written
	passed  int64  // bytes returned by Write
}

// NewOutputStream returns an OutputStream keeping limit bytes per stream.
func NewOutputStream(limit int64) *OutputStream {
	return &OutputStream{limit: limit, head: budget{bytes: limit / 2, json: OutputJSONFit * limit / 2}}
}

func (o *OutputStream) tailCap() int64 { return o.limit - o.limit/2 }

// Write takes the next bytes of output and returns what may be sent now
// (nil when nothing). The returned slice is only valid until the next
// call.
func (o *OutputStream) Write(p []byte) []byte {
	o.total += int64(len(p))
	if o.limit < 0 {
		o.passed += int64(len(p))
		return p
	}
	if o.inTail {
		o.keep(p)
		return nil
	}
	if len(o.pending) > 0 {
		p = append(o.pending, p...)
		o.pending = nil
	}
	i := 0
	for i < len(p) {
		if !utf8.FullRune(p[i:]) {
			// Wait for the rest of the character before charging it.
			o.pending = append([]byte(nil), p[i:]...)
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		if !o.head.take(r, size) {
			o.inTail = true
			o.keep(p[i:])
			break
		}
		i += size
	}
	o.passed += int64(i)
	if i == 0 {
		return nil
	}
	return p[:i]
}

// keep adds p to the tail, dropping the oldest bytes past what may be
// kept. The tail is compacted once it holds twice that, so memory stays
// within twice the limit and copying is amortised.
func (o *OutputStream) keep(p []byte) {
	c := int(o.tailCap())
	if len(p) >= c {
		o.tail = append(o.tail[:0], p[len(p)-c:]...)
		return
	}
	if len(o.tail)+len(p) > 2*c {
		n := copy(o.tail, o.tail[len(o.tail)-c:])
		o.tail = o.tail[:n]
	}
	o.tail = append(o.tail, p...)
}

// Close returns the end of the output to send after everything Write
// returned: the tail, behind a marker when bytes were omitted, fitted to
// its share of JSON text, and how many bytes were omitted in all.
func (o *OutputStream) Close() (string, int64) {
	if o.limit < 0 {
		return string(o.pending), 0
	}
	rest := string(o.pending) + string(o.tail)
	if c := int(o.tailCap()); len(rest) > c {
		rest = rest[len(rest)-c:]
	}
	room := budget{bytes: o.tailCap(), json: OutputJSONFit * o.tailCap()}
	keep := suffixWithin(rest, room)
	rest = rest[len(rest)-keep:]
	omitted := o.total - o.passed - int64(len(rest))
	if omitted > 0 {
		rest = OmittedMarker(omitted) + rest
	}
	return rest, omitted
}
