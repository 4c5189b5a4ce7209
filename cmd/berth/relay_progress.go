package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressGrace is how long a finished call's progress token stays known.
// The SDK client hands notifications to their handler on a goroutine of
// its own, so the remote's last ones (sent before its result) may be
// handled after the result has returned; within this window they still
// reach the stdio client.
const progressGrace = 10 * time.Second

// progressRoutes maps the progress tokens the relay sends the remote to
// the stdio caller's own token and session. The relay picks the remote
// tokens itself, so they are unique over the one remote session however
// the stdio client chose its own, and a notification naming any other
// token is dropped. Entries live as long as their call plus progressGrace
// and are pruned on every new call, so the map is bounded by the calls in
// flight.
type progressRoutes struct {
	mu     sync.Mutex
	next   uint64
	routes map[string]*progressRoute
}

type progressRoute struct {
	session *mcp.ServerSession
	token   any       // the stdio caller's progressToken
	ended   time.Time // zero while the call runs
}

// add registers a call's token and returns the token to send the remote
// and the function to call when the call returns.
func (p *progressRoutes) add(session *mcp.ServerSession, token any) (string, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.routes == nil {
		p.routes = map[string]*progressRoute{}
	}
	for k, rt := range p.routes {
		if !rt.ended.IsZero() && now.Sub(rt.ended) > progressGrace {
			delete(p.routes, k)
		}
	}
	p.next++
	remote := "berth-mcp-" + strconv.FormatUint(p.next, 10)
	rt := &progressRoute{session: session, token: token}
	p.routes[remote] = rt
	return remote, func() {
		p.mu.Lock()
		rt.ended = time.Now()
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
	var expired bool
	if rt != nil {
		expired = !rt.ended.IsZero() && time.Since(rt.ended) > progressGrace
	}
	p.mu.Unlock()
	if rt == nil || expired {
		return
	}
	_ = rt.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: rt.token, Progress: n.Progress, Total: n.Total, Message: n.Message,
	})
}
