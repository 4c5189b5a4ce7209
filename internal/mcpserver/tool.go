package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/schema"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// addOperation offers one operation of the catalogue as a tool. Its
// arguments are decoded the way the REST adapter decodes a body, so the
// same input gets the same answer and the same errors on both; IdeGYM's
// tools take it inside one `request` argument and answer operations in
// IdeGYM's form. A service error becomes a tool result with isError and
// a message naming the problem.
func (s *Server) addOperation(o catalog.Op) {
	in, err := schema.Of(o.Input())
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", o.Tool(), err)) // a programming error, caught by every test
	}
	out, err := schema.Of(o.MCPOutput())
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", o.Tool(), err))
	}
	objectProperties(in)
	objectProperties(out)
	schema.Portable(in, true)
	schema.Portable(out, false)
	if o.IdeGYM != "" {
		in = &jsonschema.Schema{
			Type:       "object",
			Properties: map[string]*jsonschema.Schema{"request": withDescription(in, "the request fields, the same as the REST API's body")},
			Required:   []string{"request"},
		}
	}
	// Encoded once: the SDK lists raw JSON as it is, while a *Schema would
	// be re-encoded through reflection on every tools/list.
	inJSON, outJSON := mustJSON(o.Tool(), in), mustJSON(o.Tool(), out)
	destructive, openWorld := o.Hints.Destructive, false
	s.tools[o.Tool()] = o
	observed := s.opts.Tool.Bind(o.Tool())
	s.toolStarts[o.Tool()] = observed
	s.mcp.AddTool(&mcp.Tool{
		Name:         o.Tool(),
		Title:        o.Title,
		Description:  o.Describe(),
		InputSchema:  inJSON,
		OutputSchema: outJSON,
		Annotations: &mcp.ToolAnnotations{
			Title:           o.Title,
			ReadOnlyHint:    o.Hints.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  o.Hints.Idempotent,
			OpenWorldHint:   &openWorld,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		observe.RequestFrom(ctx).SetTool(o.Tool())
		ctx, done := observed(ctx)
		res, err := s.callTool(ctx, o, req)
		failed := err
		if failed == nil && res.IsError {
			failed = errToolFailed
		}
		done(failed)
		return res, err
	})
}

// errToolFailed tells the observers a tool answered with isError.
var errToolFailed = errors.New("tool answered isError")

// callTool runs one call of the operation's tool.
func (s *Server) callTool(ctx context.Context, o catalog.Op, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		ctx = orchestrator.WithProgress(ctx, func(op orchestrator.Operation) {
			// Progress is best effort: a client that stopped
			// listening must not fail the call.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: orchestrator.Stage(op), Total: 1,
				Message: orchestrator.Describe(op),
			})
		})
	}
	res, err := s.callOperation(ctx, o, req.Params.Arguments)
	if err != nil {
		d := wire.DetailOf(err)
		if err = store.Classify(err); errors.Is(err, store.ErrUnavailable) {
			// The driver's details are for the log, not the agent.
			s.opts.Logger.Error("tool failed: database unavailable", "tool", o.Tool(), "err", err)
			d = wire.ErrorDetail{Code: wire.CodeUnavailable, Message: store.UnavailableMessage}
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s (%s)", d.Message, d.Code)}}}, nil
	}
	b, err := wire.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("tool %s: encode the answer: %w", o.Tool(), err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}

// callOperation decodes a tool's arguments and runs its operation,
// returning the answer in MCP's form.
func (s *Server) callOperation(ctx context.Context, o catalog.Op, args json.RawMessage) (any, error) {
	in, err := decodeArguments(o, args)
	if err != nil {
		return nil, err
	}
	res, err := o.Call(ctx, principal(ctx), in)
	if err != nil {
		return nil, err
	}
	return o.MCPAnswer(res), nil
}

// decodeArguments decodes a tool's arguments into the operation's input
// (from inside `request` for IdeGYM's tools).
func decodeArguments(o catalog.Op, args json.RawMessage) (any, error) {
	if o.IdeGYM != "" {
		var wrapped struct {
			Request json.RawMessage `json:"request"`
		}
		if err := wire.DecodeStrict(orEmpty(args), &wrapped); err != nil {
			return nil, err
		}
		if wrapped.Request == nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "missing required argument %q (IdeGYM's tools take their fields inside it)", "request")
		}
		args = wrapped.Request
	}
	return o.Decode(args, nil)
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

func withDescription(s *jsonschema.Schema, d string) *jsonschema.Schema {
	s.Description = d
	return s
}

func mustJSON(tool string, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tool %s: encode schema: %v", tool, err))
	}
	return b
}
