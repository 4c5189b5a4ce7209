package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// EventWriteTimeout bounds how long one event may take to be written to
// a reader that does not read.
const EventWriteTimeout = 30 * time.Second

// EventWriter writes ExecEvents as NDJSON to an HTTP answer, flushing each
// as it is written so that a reader sees output as the command prints it.
// The answer's status and headers go with the first event, so an error
// before it can still be answered as a plain JSON error.
type EventWriter struct {
	w       http.ResponseWriter
	started bool
}

// NewEventWriter returns an EventWriter answering on w.
func NewEventWriter(w http.ResponseWriter) *EventWriter { return &EventWriter{w: w} }

// Started reports whether an event was written (the answer is committed).
func (e *EventWriter) Started() bool { return e.started }

// Send writes ev and flushes it.
func (e *EventWriter) Send(ev ExecEvent) error {
	if !e.started {
		e.started = true
		e.w.Header().Set("Content-Type", NDJSONType)
		e.w.Header().Set("X-Content-Type-Options", "nosniff")
		e.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	// A reader that stops reading must not hold the writer (and the
	// command's slot) past the command's own deadline: each event has
	// EventWriteTimeout to go out. Writers that cannot set deadlines
	// (a recorder in a test) are not held by any reader anyway.
	rc := http.NewResponseController(e.w)
	_ = rc.SetWriteDeadline(time.Now().Add(EventWriteTimeout))
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush event: %w", err)
	}
	return nil
}

// ErrEventTooLong is returned by ReadEvents for a line past its bound.
var ErrEventTooLong = errors.New("event line too long")

// ReadEvents reads NDJSON ExecEvents from r and hands each to fn until
// the final one (returned), fn fails, or r ends. A line longer than
// maxLine bytes is an error, so a hostile writer cannot grow the reader.
// A stream that ends before its final event is io.ErrUnexpectedEOF.
func ReadEvents(r io.Reader, maxLine int, fn func(ExecEvent) error) (ExecEvent, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return ExecEvent{}, fmt.Errorf("%w: more than %d bytes", ErrEventTooLong, maxLine)
		}
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) == 0:
			return ExecEvent{}, fmt.Errorf("read events: stream ended before its final event: %w", io.ErrUnexpectedEOF)
		case err != nil && !errors.Is(err, io.EOF):
			return ExecEvent{}, fmt.Errorf("read events: %w", err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var ev ExecEvent
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				return ExecEvent{}, fmt.Errorf("read events: malformed event: %w", jerr)
			}
			if ev.Final() {
				return ev, nil
			}
			if ev.Stream != StreamStdout && ev.Stream != StreamStderr {
				return ExecEvent{}, fmt.Errorf("read events: event of unknown stream %.40q", ev.Stream)
			}
			if ferr := fn(ev); ferr != nil {
				return ExecEvent{}, ferr
			}
		}
		if err != nil {
			return ExecEvent{}, fmt.Errorf("read events: stream ended before its final event: %w", io.ErrUnexpectedEOF)
		}
		line = line[:0]
	}
}
