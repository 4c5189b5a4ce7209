// Package catalog declares every operation berth offers, once: its name,
// what callers read about it, the rbac action it performs, its input and
// output types, its REST route, its MCP tool and hints, and the IdeGYM
// conventions it follows. The REST routes, the OpenAPI document and the
// MCP tools are derived from this table, so an operation added here
// appears on every surface with one edit and the surfaces cannot drift
// apart; the orchestrator service stays the implementation, and this
// package decides nothing about who may do what.
package catalog

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
)

// Op is one operation.
type Op struct {
	// Name is berth's name for it: the OpenAPI operationId, the CLI
	// command, and the MCP tool unless IdeGYM names the tool.
	Name  string
	Title string
	// Summary is one line: the REST document's summary.
	Summary string
	// Description is what an agent reads about the tool (Summary when
	// empty).
	Description string
	// Action is what the operation does in rbac's terms. With Also it
	// is the one authority on the scopes a call needs: both adapters
	// refuse a token lacking one before calling (403 insufficient_scope,
	// so an OAuth client can step up), and the service never refuses a
	// token holding them for its scope (a test calls every operation to
	// hold it to that).
	Action rbac.Action
	// Also are the further actions a call may perform (scopes.go).
	Also  []Also
	Hints Hints
	// LongRunning operations answer an Operation that may still run.
	LongRunning bool
	// Task operations answer one Operation that stands for the whole
	// call, so an MCP client may run them as a task (a build answers one
	// job per image, and is long-running without being one).
	Task bool
	// REST is its route; a zero Route keeps it off REST (where REST
	// offers the same as a stream instead, say).
	REST Route
	// IdeGYM is IdeGYM's name for the tool, when it has one: MCP offers
	// the operation under that name with IdeGYM's conventions (the input
	// inside one `request` argument, operations with their result as a
	// JSON string), so IdeGYM client code runs unchanged.
	IdeGYM string
	// IdeGYMID names the operation id in the IdeGYM answer:
	// operation_id (the default) or async_operation_id.
	IdeGYMID string
	// NoMCP keeps the operation off MCP.
	NoMCP bool

	in, out reflect.Type
	fields  map[string]field // in's JSON fields
	call    func(ctx context.Context, p rbac.Principal, in any) (any, error)
}

// Hints describe an operation's effects, as MCP tool annotations do.
type Hints struct {
	ReadOnly, Destructive, Idempotent bool
}

// Route is an operation's REST method and path. Path parameters are
// named after the input's JSON fields ({server_id} fills server_id), and
// Query lists the input fields read from the query string; every other
// field comes from the JSON body.
type Route struct {
	Method, Path string
	Query        []string
}

// PathParams lists the route's path parameters in order.
func (r Route) PathParams() []string {
	var out []string
	for _, seg := range strings.Split(r.Path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, seg[1:len(seg)-1])
		}
	}
	return out
}

// HasBody tells whether the route reads a JSON body.
func (r Route) HasBody() bool {
	return r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH"
}

// define makes an Op calling fn with a decoded In.
func define[In, Out any](o Op, fn func(ctx context.Context, p rbac.Principal, in In) (Out, error)) Op {
	o.in, o.out = reflect.TypeFor[In](), reflect.TypeFor[Out]()
	o.fields = fieldsOf(o.in)
	o.call = func(ctx context.Context, p rbac.Principal, in any) (any, error) {
		return fn(ctx, p, *in.(*In))
	}
	return o
}

// Input is the type of the operation's input.
func (o Op) Input() reflect.Type { return o.in }

// Output is the type of the operation's answer on REST and, unless
// MCPAnswer reshapes it, on MCP.
func (o Op) Output() reflect.Type { return o.out }

// Call runs the operation for p with in, a pointer to an Input value
// (from Decode).
func (o Op) Call(ctx context.Context, p rbac.Principal, in any) (any, error) {
	if reflect.TypeOf(in) != reflect.PointerTo(o.in) {
		return nil, fmt.Errorf("operation %s: input is %T, want *%s", o.Name, in, o.in)
	}
	return o.call(ctx, p, in)
}

// Tool is the operation's MCP tool name.
func (o Op) Tool() string {
	if o.IdeGYM != "" {
		return o.IdeGYM
	}
	return o.Name
}

// Describe is what an agent reads about the tool.
func (o Op) Describe() string {
	if o.Description != "" {
		return o.Description
	}
	return o.Summary
}

var operationType = reflect.TypeFor[orchestrator.Operation]()

// MCPOutput is the type of the operation's answer on MCP: IdeGYM's tools
// answer operations in IdeGYM's form.
func (o Op) MCPOutput() reflect.Type {
	if o.IdeGYM != "" && o.out == operationType {
		return reflect.TypeFor[orchestrator.IdeGYMOperation]()
	}
	return o.out
}

// MCPAnswer reshapes an answer of Call for MCP (see MCPOutput).
func (o Op) MCPAnswer(v any) any {
	if op, ok := v.(orchestrator.Operation); ok && o.IdeGYM != "" {
		id := o.IdeGYMID
		if id == "" {
			id = "operation_id"
		}
		return op.IdeGYM(id)
	}
	return v
}
