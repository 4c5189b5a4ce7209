package main

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxDrained bounds how many unanswered requests drainingConn remembers.
// A client with more in flight than this when it closes stdin may lose
// the answers beyond it; no real client comes near.
const maxDrained = 4096

// drainingTransport makes the stdio session answer every request it has
// read before it ends. The SDK cancels the requests in flight as soon as
// its reader sees the end of stdin, so a client that writes a request and
// closes stdin at once (a script, or a client shutting down) would get no
// answer; here the end of stdin is reported only once they are answered.
//
// Wrapping the connection hides the SDK's unexported hook that tells the
// stdio connection the negotiated protocol version, which it uses only to
// refuse JSON-RPC batches on 2025-06-18 and later; through the relay such
// a batch is answered message by message instead.
type drainingTransport struct{ inner mcp.Transport }

func (t drainingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainingConn{Connection: c, pending: map[jsonrpc.ID]struct{}{}, closed: make(chan struct{})}, nil
}

type drainingConn struct {
	mcp.Connection

	mu      sync.Mutex
	pending map[jsonrpc.ID]struct{} // requests read and not yet answered
	idle    chan struct{}           // closed when pending empties; nil while it is empty

	closeOnce sync.Once
	closed    chan struct{}
}

func (c *drainingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok {
			c.track(req)
		}
		return msg, nil
	}
	// Whatever ended the input, what was asked before it is answered.
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		case <-c.closed:
		}
	}
	return nil, err
}

// track notes a request that awaits an answer, and forgets one the
// client cancelled: a cancelled request gets none.
func (c *drainingConn) track(req *jsonrpc.Request) {
	if req.IsCall() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.pending) >= maxDrained {
			return
		}
		if len(c.pending) == 0 {
			c.idle = make(chan struct{})
		}
		c.pending[req.ID] = struct{}{}
		return
	}
	if req.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
		c.answered(id)
	}
}

func (c *drainingConn) answered(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return
	}
	delete(c.pending, id)
	if len(c.pending) == 0 {
		close(c.idle)
		c.idle = nil
	}
}

func (c *drainingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	// A failed write is as final as a good one: the client will not
	// read an answer, so there is nothing left to wait for.
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.answered(resp.ID)
	}
	return err
}

func (c *drainingConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
