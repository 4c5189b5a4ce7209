package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relay mirrors a remote MCP server's tools and prompts on a local one
// and forwards every call to the remote session.
type relay struct {
	url    string
	log    *slog.Logger
	remote *mcp.ClientSession
	local  *mcp.Server

	toolsDirty   chan struct{}
	promptsDirty chan struct{}

	progress progressRoutes

	mu      sync.Mutex        // serializes syncs
	tools   map[string]string // mirrored tool name -> its JSON, to skip unchanged ones
	prompts map[string]string
}

func newRelay(url string, log *slog.Logger) *relay {
	return &relay{
		url: url, log: log,
		toolsDirty: make(chan struct{}, 1), promptsDirty: make(chan struct{}, 1),
		tools: map[string]string{}, prompts: map[string]string{},
	}
}

// refreshLoop re-lists what the remote said has changed. It runs apart
// from the notification handlers because a request made inside one could
// wait on the very connection that is delivering the notification.
func (r *relay) refreshLoop(ctx context.Context) {
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-r.toolsDirty:
			err = r.syncTools(ctx)
		case <-r.promptsDirty:
			err = r.syncPrompts(ctx)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("refresh the mirrored list", "err", err)
		}
	}
}

// syncTools makes the local tools equal to the remote's.
func (r *relay) syncTools(ctx context.Context) error {
	var tools []*mcp.Tool
	for t, err := range r.remote.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools of %s/mcp: %w", r.url, err)
		}
		tools = append(tools, t)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]string, len(tools))
	for _, t := range tools {
		b, _ := json.Marshal(t)
		if old, ok := r.tools[t.Name]; ok && old == string(b) {
			seen[t.Name] = old
			continue
		}
		if err := addTool(r.local, t, r.callTool); err != nil {
			r.log.Warn("skip a remote tool that cannot be mirrored", "tool", t.Name, "err", err)
			continue
		}
		seen[t.Name] = string(b)
	}
	var stale []string
	for name := range r.tools {
		if _, ok := seen[name]; !ok {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		r.local.RemoveTools(stale...)
	}
	r.tools = seen
	r.log.Debug("mirrored tools", "count", len(seen), "removed", len(stale))
	return nil
}

// syncPrompts makes the local prompts equal to the remote's.
func (r *relay) syncPrompts(ctx context.Context) error {
	var prompts []*mcp.Prompt
	for p, err := range r.remote.Prompts(ctx, nil) {
		if err != nil {
			// A server without prompts answers "method not found".
			var werr *jsonrpc.Error
			if errors.As(err, &werr) && werr.Code == jsonrpc.CodeMethodNotFound {
				break
			}
			return fmt.Errorf("list prompts of %s/mcp: %w", r.url, err)
		}
		prompts = append(prompts, p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]string, len(prompts))
	for _, p := range prompts {
		b, _ := json.Marshal(p)
		if old, ok := r.prompts[p.Name]; ok && old == string(b) {
			seen[p.Name] = old
			continue
		}
		r.local.AddPrompt(p, r.getPrompt)
		seen[p.Name] = string(b)
	}
	var stale []string
	for name := range r.prompts {
		if _, ok := seen[name]; !ok {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		r.local.RemovePrompts(stale...)
	}
	r.prompts = seen
	return nil
}

// addTool registers t on s, turning the SDK's panic on a schema it
// refuses (e.g. an input schema that is not an object) into an error, so
// that one odd remote tool cannot take the relay down.
func addTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// callTool forwards a call unchanged. Arguments are not validated here:
// the remote does that and its answer, tool error or not, is relayed
// as-is.
func (r *relay) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Meta: forwardMeta(req.Params.Meta), Name: req.Params.Name}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		remote, done := r.progress.add(req.Session, token)
		defer done()
		params.SetProgressToken(remote)
	}
	res, err := r.remote.CallTool(ctx, params)
	return res, r.remoteErr(err)
}

func (r *relay) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	params := *req.Params
	params.Meta = forwardMeta(params.Meta)
	res, err := r.remote.GetPrompt(ctx, &params)
	return res, r.remoteErr(err)
}

// forwardMeta drops what belongs to the stdio hop only: the protocol's
// own keys (protocol version, client info: the remote session negotiated
// its own) and the progress token, which callTool replaces by one of its
// own (relay_progress.go).
func forwardMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// remoteErr keeps JSON-RPC errors of the remote as they are (their codes
// mean something to the client) and names the server in the others,
// which are about reaching it.
func (r *relay) remoteErr(err error) error {
	if err == nil {
		return nil
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	return fmt.Errorf("berth at %s: %w", r.url, err)
}
