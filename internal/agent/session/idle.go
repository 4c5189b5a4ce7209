package session

import "github.com/berth-mcp/berth/internal/wire"

// idleLimit bounds the output kept per stream between calls.
const idleLimit = wire.DefaultMaxOutputBytes

// idle drains a shell's output between calls, so that a background job
// that prints (a server logging requests) never blocks on a full pipe.
// What it drains goes to the start of the next call's output.
type idle struct {
	stop, done chan struct{}
	out, err   tailBuffer
}

// resumeIdle starts draining, beginning with out and errb: what followed
// the last call's markers.
func (sh *shell) resumeIdle(out, errb []byte) {
	id := &idle{stop: make(chan struct{}), done: make(chan struct{})}
	id.out.limit, id.err.limit = idleLimit, idleLimit
	id.out.Write(out)
	id.err.Write(errb)
	sh.idleMu.Lock()
	defer sh.idleMu.Unlock()
	if sh.closing {
		return
	}
	sh.idle = id
	go func() {
		defer close(id.done)
		out, errc := sh.out, sh.errc
		for out != nil || errc != nil {
			select {
			case <-id.stop:
				return
			case <-sh.quit:
				return
			case p, ok := <-out:
				if !ok {
					out = nil
					continue
				}
				id.out.Write(p)
			case p, ok := <-errc:
				if !ok {
					errc = nil
					continue
				}
				id.err.Write(p)
			}
		}
	}()
}

// pauseIdle stops draining and hands over what was drained.
func (sh *shell) pauseIdle() *idle {
	sh.idleMu.Lock()
	id := sh.idle
	sh.idle = nil
	sh.idleMu.Unlock()
	if id == nil {
		return &idle{}
	}
	close(id.stop)
	<-id.done
	return id
}

// tailBuffer keeps the last limit bytes written to it and counts the rest.
type tailBuffer struct {
	limit   int
	b       []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	// Cut only once the slack doubles, so that writing stays linear.
	if over := len(t.b) - t.limit; over > 0 && len(t.b) >= 2*t.limit {
		t.dropped += int64(over)
		t.b = append(t.b[:0:0], t.b[over:]...)
	}
	return len(p), nil
}

// bytes returns the kept bytes and how many were dropped before them.
func (t *tailBuffer) bytes() ([]byte, int64) {
	if over := len(t.b) - t.limit; over > 0 {
		return t.b[over:], t.dropped + int64(over)
	}
	return t.b, t.dropped
}
