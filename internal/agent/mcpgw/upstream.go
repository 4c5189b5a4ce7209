package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// opTimeout bounds connecting to and listing one upstream.
	opTimeout = 10 * time.Second
	// maxUpstreamTools stops a server whose pagination never ends.
	maxUpstreamTools = 1000
	// maxToolName is the longest tool name MCP allows.
	maxToolName = 128
	// maxUpstreamMessage bounds one message from an upstream (a JSON
	// answer or one event of a stream): the SDK would read a JSON answer
	// whole however long it is.
	maxUpstreamMessage = 4 << 20
	// maxListingBytes bounds the tool definitions kept of one upstream:
	// pages of fat tools would otherwise add up to maxUpstreamTools
	// messages.
	maxListingBytes = 8 << 20
)

// upstream is one configured MCP server. Name, cfg and the clients are
// fixed: a changed config file retires the upstream and makes a new one.
type upstream struct {
	name    string
	cfg     upstreamConfig
	display string
	http    *http.Client
	client  *mcp.Client

	// Guarded by Gateway.mu.
	conn    *upstreamConn     // nil while down
	tools   map[string]string // exposed name -> fingerprint of the registered tool
	listing string            // fingerprint of the last applied tools/list
	lastErr string
	retired bool
}

// upstreamConn is one live client session.
type upstreamConn struct {
	sess      *mcp.ClientSession
	cancel    context.CancelFunc // ends the session's context (the SSE stream)
	transport string
}

func (c *upstreamConn) close() {
	_ = c.sess.Close()
	c.cancel()
}

func (g *Gateway) newUpstream(name string, cfg upstreamConfig) *upstream {
	u := &upstream{
		name:    name,
		cfg:     cfg,
		display: displayURL(cfg.URL),
		http:    boundAnswers(withHeaders(g.httpClient, cfg.Headers), maxUpstreamMessage),
		tools:   map[string]string{},
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "berth-agent-gateway", Version: g.version}, &mcp.ClientOptions{
		Logger: g.sdkLog.With("upstream", name),
		// The next round re-lists the upstream; listing from inside a
		// notification handler would hold up the session's reader.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { g.requestRound() },
	})
	return u
}

// scrub keeps credentials in the URL's query or user info out of error
// texts that are logged and reported.
func (u *upstream) scrub(err error) string {
	return strings.ReplaceAll(err.Error(), u.cfg.URL, u.display)
}

// refresh re-lists a live upstream, or (re)connects a down one.
func (g *Gateway) refresh(ctx context.Context, u *upstream) {
	g.mu.Lock()
	conn := u.conn
	g.mu.Unlock()
	if conn != nil {
		tools, err := listTools(ctx, conn.sess)
		if err == nil {
			g.apply(u, conn, tools)
			return
		}
		if ctx.Err() != nil {
			return
		}
		g.markDown(u, conn, fmt.Errorf("list tools: %w", err))
		// Fall through: a restarted upstream is best reconnected now.
	}
	conn, err := g.connect(ctx, u)
	if err != nil {
		if ctx.Err() == nil {
			g.recordFailure(u, err)
		}
		return
	}
	tools, err := listTools(ctx, conn.sess)
	if err != nil {
		conn.close()
		if ctx.Err() == nil {
			g.recordFailure(u, fmt.Errorf("list tools: %w", err))
		}
		return
	}
	if !g.apply(u, conn, tools) {
		conn.close()
	}
}

// connect opens a session over streamable HTTP, falling back to the older
// SSE transport when the server answered but refused streamable HTTP.
func (g *Gateway) connect(ctx context.Context, u *upstream) (*upstreamConn, error) {
	conn, err := g.connectOver(ctx, u, "streamable", &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: u.http, MaxEventSize: maxUpstreamMessage})
	if err == nil || ctx.Err() != nil || isDialError(err) {
		return conn, err
	}
	conn, sseErr := g.connectOver(ctx, u, "sse", &mcp.SSEClientTransport{Endpoint: u.cfg.URL, HTTPClient: u.http, MaxEventSize: maxUpstreamMessage})
	if sseErr == nil {
		return conn, nil
	}
	return nil, fmt.Errorf("connect over streamable HTTP: %w (SSE fallback: %v)", err, sseErr)
}

func (g *Gateway) connectOver(ctx context.Context, u *upstream, name string, t mcp.Transport) (*upstreamConn, error) {
	// The SSE transport ties its event stream to the context given to
	// Connect, so that context must outlive the handshake; a timer bounds
	// the handshake instead of a deadline.
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(opTimeout, cancel)
	sess, err := u.client.Connect(sctx, t, nil)
	if !timer.Stop() && err == nil {
		_ = sess.Close()
		err = fmt.Errorf("handshake took longer than %s", opTimeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &upstreamConn{sess: sess, cancel: cancel, transport: name}, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func listTools(ctx context.Context, sess *mcp.ClientSession) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var tools []*mcp.Tool
	size := 0
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(tools) == maxUpstreamTools {
			return nil, fmt.Errorf("more than %d tools", maxUpstreamTools)
		}
		if size += len(fingerprint(t)); size > maxListingBytes {
			return nil, fmt.Errorf("tool definitions of more than %d bytes", maxListingBytes)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// recordFailure notes a failed connection attempt, warning only when the
// error differs from the last one so a long outage logs once.
func (g *Gateway) recordFailure(u *upstream, err error) {
	msg := u.scrub(err)
	g.mu.Lock()
	changed := msg != u.lastErr
	u.lastErr = msg
	g.mu.Unlock()
	if changed {
		g.log.Warn("upstream unreachable; its tools are unavailable until it answers",
			"upstream", u.name, "url", u.display, "error", msg, "retry_every", g.interval)
	} else {
		g.log.Debug("upstream still unreachable", "upstream", u.name, "error", msg)
	}
}

// markDown drops conn if it is still the upstream's session. The
// upstream's tools stay listed and answer that it is unreachable.
func (g *Gateway) markDown(u *upstream, conn *upstreamConn, err error) {
	msg := u.scrub(err)
	g.mu.Lock()
	if u.conn != conn {
		g.mu.Unlock()
		return
	}
	u.conn = nil
	u.lastErr = msg
	g.mu.Unlock()
	g.log.Warn("upstream went down; retrying", "upstream", u.name, "url", u.display, "error", msg, "retry_every", g.interval)
	conn.close()
	g.requestRound()
}

// apply installs conn as the upstream's session and makes the exposed
// tools match the listing. It reports false if the upstream was retired
// meanwhile, in which case the caller closes conn.
func (g *Gateway) apply(u *upstream, conn *upstreamConn, tools []*mcp.Tool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if u.retired {
		return false
	}
	if u.conn == nil {
		g.log.Info("upstream connected", "upstream", u.name, "url", u.display, "transport", conn.transport, "tools", len(tools))
	}
	u.conn = conn
	u.lastErr = ""
	listing := fingerprint(tools)
	if listing == u.listing {
		return true
	}
	u.listing = listing

	want := map[string]*mcp.Tool{}
	for _, t := range tools {
		name := u.name + "_" + t.Name
		var why string
		switch {
		case !validToolName(name):
			why = fmt.Sprintf("name %q is not a valid MCP tool name", name)
		case g.builtins[name]:
			why = fmt.Sprintf("name %q is a built-in tool, which wins", name)
		case g.owners[name] != nil && g.owners[name] != u:
			why = fmt.Sprintf("name %q is already taken by upstream %q", name, g.owners[name].name)
		case want[name] != nil:
			why = fmt.Sprintf("upstream lists tool %q twice", t.Name)
		}
		if why != "" {
			g.log.Warn("skipping upstream tool", "upstream", u.name, "tool", t.Name, "reason", why)
			continue
		}
		want[name] = t
	}
	var gone []string
	for name := range u.tools {
		if want[name] == nil {
			gone = append(gone, name)
			delete(u.tools, name)
			delete(g.owners, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for name, t := range want {
		fp := fingerprint(t)
		if u.tools[name] == fp {
			continue
		}
		if err := g.register(u.name, name, t); err != nil {
			g.log.Warn("skipping upstream tool", "upstream", u.name, "tool", t.Name, "reason", err.Error())
			if _, had := u.tools[name]; had {
				g.server.RemoveTools(name)
				delete(u.tools, name)
				delete(g.owners, name)
			}
			continue
		}
		u.tools[name] = fp
		g.owners[name] = u
	}
	g.log.Info("upstream tools updated", "upstream", u.name, "tools", len(u.tools))
	return true
}

// retireLocked removes the upstream's tools and returns its session for
// the caller to close outside the lock.
func (g *Gateway) retireLocked(u *upstream) *upstreamConn {
	u.retired = true
	names := make([]string, 0, len(u.tools))
	for name := range u.tools {
		names = append(names, name)
		delete(g.owners, name)
	}
	u.tools = map[string]string{}
	if len(names) > 0 {
		g.server.RemoveTools(names...)
	}
	conn := u.conn
	u.conn = nil
	return conn
}

// register exposes one upstream tool under name.
func (g *Gateway) register(upName, name string, t *mcp.Tool) (err error) {
	schema, err := objectSchema(t.InputSchema)
	if err != nil {
		return err
	}
	tool := &mcp.Tool{
		Name:         name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  schema,
		OutputSchema: t.OutputSchema,
		Annotations:  t.Annotations,
		Icons:        t.Icons,
	}
	// The SDK panics on tool definitions it rejects; the definition comes
	// from another process, so that must become a skipped tool, not a crash.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rejected by the MCP SDK: %v", r)
		}
	}()
	g.server.AddTool(tool, g.forward(upName, t.Name))
	return nil
}

// objectSchema checks that an upstream input schema is an object schema,
// defaulting a missing type to "object" as lenient servers omit it.
func objectSchema(s any) (map[string]any, error) {
	var m map[string]any
	raw, err := json.Marshal(s)
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil || m == nil {
		return nil, errors.New("input schema is not a JSON object")
	}
	switch typ := m["type"]; typ {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		return nil, fmt.Errorf("input schema has type %v, want object", typ)
	}
	return m, nil
}

// forward returns the handler of an exposed upstream tool. The upstream is
// looked up by name on each call, so the handler follows reconnects.
func (g *Gateway) forward(upName, toolName string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		g.mu.Lock()
		u := g.upstreams[upName]
		var conn *upstreamConn
		lastErr := "not connected yet"
		if u != nil {
			conn = u.conn
			if u.lastErr != "" {
				lastErr = u.lastErr
			}
		}
		g.mu.Unlock()
		if conn == nil {
			return errorResult("upstream MCP server %q is unreachable (%s); the gateway retries it every %s", upName, lastErr, g.interval), nil
		}
		params := &mcp.CallToolParams{Name: toolName}
		if len(req.Params.Arguments) > 0 {
			params.Arguments = req.Params.Arguments
		}
		res, err := conn.sess.CallTool(ctx, params)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rpcErr, ok := answeredError(err); ok {
			// The upstream answered; a stale tool list is the likely cause.
			g.requestRound()
			return errorResult("upstream MCP server %q rejected the call to %q: %s", upName, toolName, rpcErr.Message), nil
		}
		g.markDown(u, conn, fmt.Errorf("call %s: %w", toolName, err))
		return errorResult("upstream MCP server %q is unreachable (%s); the gateway retries it every %s", upName, u.scrub(err), g.interval), nil
	}
}

// codeRejected is the SDK's (unexported) jsonrpc2.ErrRejected code, which
// its client transports wrap around failures to reach the server.
const codeRejected = -32005

// answeredError returns the JSON-RPC error the upstream answered with, if
// err is one rather than a failure to reach the upstream.
func answeredError(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != codeRejected {
		return rpcErr, true
	}
	return nil, false
}

func errorResult(format string, args ...any) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	res.SetError(fmt.Errorf(format, args...))
	return res
}

func validToolName(name string) bool {
	if name == "" || len(name) > maxToolName {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// fingerprint is a stable identity of a tool definition or listing, to tell
// whether anything changed since the last round.
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %p", v)
	}
	return string(b)
}
