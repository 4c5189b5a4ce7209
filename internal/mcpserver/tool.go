package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/schema"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// toolSpec describes one tool: its name, what an agent reads about it,
// the rbac action it performs (for the scope pre-check) and its hints.
type toolSpec struct {
	name        string
	title       string
	description string
	action      rbac.Action
	readOnly    bool
	destructive bool
	idempotent  bool
}

// add registers a tool whose input is In and structured output Out, with
// schemas inferred the same way as the OpenAPI document's. A service error
// becomes a tool result with isError and a message naming the problem.
func add[In, Out any](s *Server, spec toolSpec, call func(ctx context.Context, p rbac.Principal, in In) (Out, error)) {
	in, err := schema.For[In]()
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", spec.name, err)) // a programming error, caught by every test
	}
	out, err := schema.For[Out]()
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", spec.name, err))
	}
	objectProperties(in)
	objectProperties(out)
	// Encoded once: the SDK lists raw JSON as it is, while a *Schema would
	// be re-encoded through reflection on every tools/list.
	inJSON, outJSON := mustJSON(spec.name, in), mustJSON(spec.name, out)
	destructive, openWorld := spec.destructive, false
	s.tools[spec.name] = spec.action
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:         spec.name,
		Title:        spec.title,
		Description:  spec.description,
		InputSchema:  inJSON,
		OutputSchema: outJSON,
		Annotations: &mcp.ToolAnnotations{
			Title:           spec.title,
			ReadOnlyHint:    spec.readOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  spec.idempotent,
			OpenWorldHint:   &openWorld,
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest, input In) (*mcp.CallToolResult, Out, error) {
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			ctx = orchestrator.WithProgress(ctx, func(op orchestrator.Operation) {
				// Progress is best effort: a client that stopped
				// listening must not fail the call.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: orchestrator.Stage(op), Total: 1,
					Message: fmt.Sprintf("%s %s", op.Type, op.Status),
				})
			})
		}
		res, err := call(ctx, principal(ctx), input)
		if err != nil {
			var zero Out
			d := wire.DetailOf(err)
			if err = store.Classify(err); errors.Is(err, store.ErrUnavailable) {
				// The driver's details are for the log, not the agent.
				s.opts.Logger.Error("tool failed: database unavailable", "tool", spec.name, "err", err)
				d = wire.ErrorDetail{Code: wire.CodeUnavailable, Message: store.UnavailableMessage}
			}
			return nil, zero, fmt.Errorf("%s (%s)", d.Message, d.Code)
		}
		return nil, res, nil
	})
}

// request is IdeGYM's convention: one top-level `request` argument holding
// the REST request's fields, so IdeGYM client code runs unchanged.
type request[T any] struct {
	Request T `json:"request" jsonschema:"the request fields, the same as the REST API's body"`
}

func mustJSON(tool string, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tool %s: encode schema: %v", tool, err))
	}
	return b
}
