package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoutes maps the progress tokens the relay sends the remote to
// the stdio caller's own token and session. The relay picks the remote
// tokens itself, so they are unique over the one remote session however
// the stdio client chose its own, and a notification naming any other
// token is dropped. An entry lives exactly as long as its call: every
// notification the remote sent before its result has been forwarded by
// then (see progressTap), so the map is bounded by the calls in flight.
type progressRoutes struct {
	mu     sync.Mutex
	next   uint64
	routes map[string]*progressRoute
}

type progressRoute struct {
	session *mcp.ServerSession
	token   any // the stdio caller's progressToken
}

// add registers a call's token and returns the token to send the remote
// and the function to call when the call returns.
func (p *progressRoutes) add(session *mcp.ServerSession, token any) (string, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes == nil {
		p.routes = map[string]*progressRoute{}
	}
	p.next++
	remote := "berth-mcp-" + strconv.FormatUint(p.next, 10)
	p.routes[remote] = &progressRoute{session: session, token: token}
	return remote, func() {
		p.mu.Lock()
		delete(p.routes, remote)
		p.mu.Unlock()
	}
}

// forward passes one remote progress notification on to the stdio caller
// under its own token. Delivery is best effort, as on the remote: a
// client that stopped listening must not fail anything.
func (p *progressRoutes) forward(ctx context.Context, n *mcp.ProgressNotificationParams) {
	remote, ok := n.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	rt := p.routes[remote]
	p.mu.Unlock()
	if rt == nil {
		return
	}
	_ = rt.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: rt.token, Progress: n.Progress, Total: n.Total, Message: n.Message,
	})
}

// progressTap forwards the remote's progress notifications while the
// SDK client reads the event stream they come in, rather than from the
// SDK's notification handler. The SDK hands notifications to that handler
// on a queue of its own but completes a call as soon as it reads the
// result, so the last notifications could reach stdout after the
// response, which clients drop. Read here, each notification is on
// stdout before the bytes that follow it, the result among them, reach
// the SDK at all.
type progressTap struct {
	base   http.RoundTripper
	routes *progressRoutes
}

func (t *progressTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &sseTap{ctx: req.Context(), body: resp.Body, routes: t.routes}
	}
	return resp, nil
}

// maxTapLine bounds what sseTap holds of one line. A longer line is
// passed on untouched and not inspected: progress notifications are
// small, and the remote's results may be large.
const maxTapLine = 64 << 10

// sseTap passes an event stream through unchanged, forwarding each
// progress notification in it as its line completes.
type sseTap struct {
	ctx    context.Context
	body   io.ReadCloser
	routes *progressRoutes
	line   []byte // the current line so far, up to maxTapLine
	long   bool   // the current line outgrew maxTapLine
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	rest := p[:n]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !s.long && len(s.line)+len(chunk) <= maxTapLine {
			s.line = append(s.line, chunk...)
		} else {
			s.long, s.line = true, s.line[:0]
		}
		if i < 0 {
			break
		}
		if !s.long {
			s.inspect(bytes.TrimSuffix(s.line, []byte{'\r'}))
		}
		s.line, s.long = s.line[:0], false
		rest = rest[i+1:]
	}
	return n, err
}

// inspect forwards line if it is the data of a progress notification.
func (s *sseTap) inspect(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"notifications/progress"`)) {
		return
	}
	var msg struct {
		Method string                          `json:"method"`
		Params *mcp.ProgressNotificationParams `json:"params"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &msg) != nil || msg.Method != "notifications/progress" || msg.Params == nil {
		return
	}
	s.routes.forward(s.ctx, msg.Params)
}

func (s *sseTap) Close() error { return s.body.Close() }
