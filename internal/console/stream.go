package console

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// How a live page's event stream behaves. Each stream holds one
// goroutine, one connection and one pending tick at most (ticks coalesce
// in the orchestrator), and writes with a deadline: a client that stops
// reading is dropped instead of making berth buffer for it.
const (
	defaultStreamWriteTimeout = 10 * time.Second
	streamKeepAlive           = 25 * time.Second
	// streamLife ends a stream after a while; the browser reconnects,
	// and its session and rights are looked at afresh then.
	streamLife = 15 * time.Minute
	// streamMinGap spaces renders of one stream, so a burst of changes
	// costs one read of the page's data, not one per change.
	streamMinGap = 250 * time.Millisecond
	// streamRetry is how long the browser waits before reconnecting.
	streamRetry = 3 * time.Second
)

// watchFunc subscribes to the changes a live page shows.
type watchFunc func(ctx context.Context, p rbac.Principal) (<-chan struct{}, func(), error)

// renderFunc renders the live part of a page for v.
type renderFunc func(ctx context.Context, v *Visit) ([]byte, error)

// stream serves a live page's server-sent events: the live part, as
// rendered HTML, at once and after every change watch reports. The
// rendered part went through html/template like the page, so the script
// that swaps it in adds no markup of its own.
func (c *Console) stream(watch watchFunc, render renderFunc) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, v *Visit) {
		ctx := r.Context()
		ticks, stop, err := watch(ctx, v.Principal)
		if err != nil {
			d := wire.DetailOf(err)
			http.Error(w, d.Message, wire.StatusOf(d.Code))
			return
		}
		defer stop()
		rc := http.NewResponseController(w)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		send := func(b []byte) bool {
			if err := rc.SetWriteDeadline(time.Now().Add(c.opts.StreamWriteTimeout)); err != nil {
				return false
			}
			if _, err := w.Write(b); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
		if !send([]byte("retry: " + strconv.Itoa(int(streamRetry/time.Millisecond)) + "\n\n")) {
			return
		}
		life := time.NewTimer(streamLife)
		defer life.Stop()
		keepAlive := time.NewTicker(streamKeepAlive)
		defer keepAlive.Stop()
		update := func() bool {
			// The session may have ended meanwhile (signed out elsewhere,
			// user disabled): look again before showing anything.
			cur, err := c.lookup(r)
			if err != nil || !cur.SignedIn() || cur.Principal.UserID != v.Principal.UserID {
				send(event("signedout", nil))
				return false
			}
			b, err := render(ctx, cur)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("console: render live part", "path", r.URL.Path, "err", err)
				}
				return send(event("gone", []byte(wire.DetailOf(err).Message)))
			}
			return send(event("live", b))
		}
		if !update() {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.closing:
				return
			case <-life.C:
				return
			case <-keepAlive.C:
				if !send([]byte(": keep-alive\n\n")) {
					return
				}
			case <-ticks:
				if !update() {
					return
				}
				select {
				case <-time.After(streamMinGap):
				case <-ctx.Done():
					return
				case <-c.closing:
					return
				}
			}
		}
	}
}

// event frames data as one server-sent event of type name. Every line
// ending (CR, LF or CRLF, as the format reads them) starts a new data
// line, so nothing in data can end the event or forge a field.
func event(name string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + name + "\n")
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		b.WriteString("data: ")
		b.Write(data[:i])
		b.WriteByte('\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}
