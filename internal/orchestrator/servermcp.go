package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

// ServerToolsRequest names a server whose MCP tools to list.
type ServerToolsRequest struct {
	ClientID string `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	ServerID string `json:"server_id" jsonschema:"the server"`
}

// ServerTool is one tool of a server's MCP endpoint.
type ServerTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ServerTools lists a server's MCP tools.
type ServerTools struct {
	Tools []ServerTool `json:"tools"`
}

// CallServerToolRequest calls a tool of a server's MCP endpoint.
type CallServerToolRequest struct {
	ClientID  string         `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	ServerID  string         `json:"server_id" jsonschema:"the server"`
	ToolName  string         `json:"tool_name" jsonschema:"tool name as listed by list_server_mcp_tools, e.g. pycharm_steroid_open_project"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments"`
}

// ServerToolResult is the result of a server tool call.
type ServerToolResult struct {
	Content           []json.RawMessage `json:"content"`
	IsError           bool              `json:"is_error"`
	StructuredContent json.RawMessage   `json:"structured_content,omitempty"`
}

// bridge is berth's MCP client connected to a server's agent, for one
// call: ctx carries the call's deadline.
type bridge struct {
	*mcp.ClientSession
	ctx      context.Context
	cancel   context.CancelFunc
	serverID string
	rt       *forward.AgentTransport
}

// Close ends the session and the call.
func (b bridge) Close() error {
	defer b.cancel()
	return b.ClientSession.Close()
}

// fail is the error of a failed MCP exchange: gateway_timeout when the
// call's deadline cut it, else bad_gateway naming what was done, and the
// limit when the sandbox answered past it (the SDK reports an answer cut
// short only as a broken stream).
func (b bridge) fail(what string, err error) error {
	if cut := forward.Cut(b.ctx); cut != nil {
		return cut
	}
	if limit := b.rt.Exceeded(); limit != nil {
		return wire.Errorf(wire.CodeBadGateway, "%s on server %s: %w", what, b.serverID, limit)
	}
	return wire.Errorf(wire.CodeBadGateway, "%s on server %s: %v", what, b.serverID, err)
}

// callFailed is the error of a failed tools/call. A tool the endpoint
// does not have is the caller's mistake, not the sandbox's: not_found,
// saying where the names are. The endpoint answers that as invalid
// params (the go-sdk's "unknown tool"); a sandbox that says so falsely
// only misleads its own caller.
func (b bridge) callFailed(tool string, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams && strings.Contains(rpc.Message, "unknown tool") {
		return wire.Errorf(wire.CodeNotFound,
			"tool_name: server %s has no MCP tool %q; list_server_mcp_tools (GET /api/servers/%s/mcp/tools) lists the names it has",
			b.serverID, tool, b.serverID)
	}
	return b.fail("call "+tool, err)
}

// serverMCP connects an MCP client to the server's agent, for one call
// (named by what) bounded by the MCP deadline; the caller closes it.
func (s *Service) serverMCP(ctx context.Context, p rbac.Principal, clientID, serverID, what string) (bridge, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerExec, serverID, clientID)
	if err != nil {
		return bridge{}, err
	}
	t, err := s.target(ctx, srv)
	if err != nil {
		return bridge{}, err
	}
	s.touch(ctx, srv)
	// The MCP client reads answers whole: the forwarder's transport cuts
	// each at the content limit.
	b := bridge{serverID: srv.ID, rt: s.fwd.RoundTripper(t, s.contentAnswerLimit())}
	b.ctx, b.cancel = s.bound(ctx, srv.ID, s.mcpCall(what))
	client := mcp.NewClient(&mcp.Implementation{Name: "berth", Version: version.Version}, nil)
	b.ClientSession, err = client.Connect(b.ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://sandbox/mcp", HTTPClient: &http.Client{Transport: b.rt},
	}, nil)
	if err != nil {
		defer b.cancel()
		return bridge{}, b.fail("connect to the MCP endpoint", err)
	}
	return b, nil
}

// ListServerTools lists the tools of a server's MCP endpoint: the agent's
// built-in file tools and every upstream it proxies.
func (s *Service) ListServerTools(ctx context.Context, p rbac.Principal, req ServerToolsRequest) (ServerTools, error) {
	cs, err := s.serverMCP(ctx, p, req.ClientID, req.ServerID, "list_server_mcp_tools")
	if err != nil {
		return ServerTools{}, err
	}
	defer cs.Close()
	out := ServerTools{Tools: []ServerTool{}}
	for tool, err := range cs.Tools(cs.ctx, nil) {
		if err != nil {
			return ServerTools{}, cs.fail("list tools", err)
		}
		if len(out.Tools) == maxServerTools {
			return ServerTools{}, wire.Errorf(wire.CodeBadGateway, "server %s lists more than %d tools", req.ServerID, maxServerTools)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		out.Tools = append(out.Tools, ServerTool{Name: tool.Name, Description: tool.Description, InputSchema: schema})
	}
	return out, nil
}

// CallServerTool calls one tool of a server's MCP endpoint. A tool that
// fails is a result with is_error, not an error.
func (s *Service) CallServerTool(ctx context.Context, p rbac.Principal, req CallServerToolRequest) (ServerToolResult, error) {
	if strings.TrimSpace(req.ToolName) == "" {
		return ServerToolResult{}, wire.Errorf(wire.CodeBadRequest, "tool_name is required")
	}
	cs, err := s.serverMCP(ctx, p, req.ClientID, req.ServerID, "call_server_mcp_tool")
	if err != nil {
		return ServerToolResult{}, err
	}
	defer cs.Close()
	res, err := cs.CallTool(cs.ctx, &mcp.CallToolParams{Name: req.ToolName, Arguments: req.Arguments})
	s.audit(ctx, p, "server.mcp.call", "server", req.ServerID, "", outcome(err), map[string]any{"tool": req.ToolName})
	if err != nil {
		return ServerToolResult{}, cs.callFailed(req.ToolName, err)
	}
	out := ServerToolResult{Content: []json.RawMessage{}, IsError: res.IsError}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return ServerToolResult{}, fmt.Errorf("encode structured content of %s: %w", req.ToolName, err)
		}
		// MCP says structured content is an object; anything else a
		// sandbox answers is left out rather than passed on mislabelled.
		if len(b) > 0 && b[0] == '{' {
			out.StructuredContent = b
		}
	}
	for _, c := range res.Content {
		b, err := json.Marshal(c)
		if err != nil {
			return ServerToolResult{}, fmt.Errorf("encode content of %s: %w", req.ToolName, err)
		}
		out.Content = append(out.Content, b)
	}
	return out, nil
}

// ForwardRequest is IdeGYM's forward_request: one HTTP request to a
// server's agent, answered with its status, headers and body.
type ForwardRequest struct {
	ClientID string            `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	ServerID string            `json:"server_id" jsonschema:"the server"`
	Path     string            `json:"path" jsonschema:"server-internal path without a leading slash, e.g. api/tools/bash"`
	Method   string            `json:"method,omitempty" jsonschema:"HTTP method: GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS (default GET, or POST when body is given)"`
	Body     string            `json:"body,omitempty" jsonschema:"request body (JSON text for the agent's API)"`
	Headers  map[string]string `json:"headers,omitempty" jsonschema:"extra request headers; hop-by-hop, credential and forwarding headers (Authorization, Cookie, Forwarded, X-Forwarded-*, ...) are refused"`
}

// ForwardRequest sends one request into a server and returns the answer.
func (s *Service) ForwardRequest(ctx context.Context, p rbac.Principal, req ForwardRequest) (ForwardedResponse, error) {
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = http.MethodGet
		if req.Body != "" {
			method = http.MethodPost
		}
	}
	// The caller's mistakes are 400s naming the field, before anything
	// reaches the transport (which would fail on them as a gateway).
	if err := forward.CheckMethod(method); err != nil {
		return ForwardedResponse{}, err
	}
	if err := forward.CheckHeaders(req.Headers); err != nil {
		return ForwardedResponse{}, err
	}
	t, err := s.ForwardTarget(ctx, p, req.ClientID, req.ServerID, req.Path)
	if err != nil {
		return ForwardedResponse{}, err
	}
	h := http.Header{}
	for k, v := range req.Headers {
		h.Set(k, v)
	}
	if req.Body != "" && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	// What the request does in the sandbox is not berth's to know: it may
	// take as long as it likes, while its answer moves.
	ctx, idle, stop := s.stream(ctx, t.ServerID, "forward_request")
	defer stop()
	resp, err := s.fwd.Do(ctx, t, method, req.Path, h, bytes.NewReader([]byte(req.Body)))
	if err != nil {
		return ForwardedResponse{}, err
	}
	// Closed as ReadBody leaves it, which gives its share of the answer
	// budget back.
	defer func() { resp.Body.Close() }()
	resp.Body = idle.AgentBody(resp.Body)
	// The body is sandbox content returned whole: the output cap bounds it.
	raw, err := s.fwd.ReadBody(ctx, resp, s.cfg.MaxOutputBytes, req.ServerID)
	switch {
	case err != nil && forward.Cut(ctx) != nil:
		return ForwardedResponse{}, err
	case errors.Is(err, forward.ErrAnswerTooLarge):
		return ForwardedResponse{}, fmt.Errorf("%w; /api/forward streams answers of any size", err)
	case err != nil:
		return ForwardedResponse{}, wire.Errorf(wire.CodeBadGateway, "read answer of server %s: %v", req.ServerID, err)
	}
	return forwardedResponse(resp, string(raw)), nil
}
