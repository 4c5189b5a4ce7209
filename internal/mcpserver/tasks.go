package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// MCP tasks (protocol 2025-11-25, experimental) for the long-running
// tools. A task is a durable operation and its taskId is the operation
// id, so every replica answers tasks/get, tasks/result, tasks/cancel and
// tasks/list from PostgreSQL, and a task outlives the replica that
// started it. The go-sdk (v1.8.0) knows nothing of tasks and would
// answer these methods with -32601, so they are served here, before it;
// the SDK's answers to initialize and tools/list are amended to declare
// the capability and each task tool's execution.taskSupport.
//
// build_images_from_yaml is not a task tool: one call starts one build
// job per image, each with its own status (get_job_status), so no single
// operation stands for the call.

// taskPollInterval is the pollInterval suggested to clients, in ms.
const taskPollInterval = 1000

// relatedTaskMeta is the _meta key that ties a result to its task.
const relatedTaskMeta = "io.modelcontextprotocol/related-task"

// JSON-RPC error codes the task methods answer.
const (
	codeInvalidParams = -32602
	codeInternal      = -32603
)

// taskable says whether an operation may run as a task.
func taskable(o catalog.Op) bool { return o.Task }

// rpcMessage is a JSON-RPC request as the task layer reads it.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// taskParams are the params of tools/call and of the tasks/* methods that
// the task layer reads.
type taskParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
	TaskID    string          `json:"taskId"`
	Cursor    string          `json:"cursor"`
}

// serveTasks answers the message in body when it is the task layer's to
// answer, and reports whether it did. Only single messages count: batches
// belong to protocol versions older than tasks.
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request, body []byte, jsonHandler http.Handler) bool {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	var m rpcMessage
	if json.Unmarshal(trimmed, &m) != nil || len(m.ID) == 0 {
		return false
	}
	var params taskParams
	_ = json.Unmarshal(m.Params, &params)
	if declaresTasksExtension(m.Params) {
		return s.serveTasksExtension(w, r, m, params, jsonHandler)
	}
	switch m.Method {
	case "initialize":
		s.amend(w, r, jsonHandler, s.initAmend)
	case "tools/list":
		s.amend(w, r, jsonHandler, s.listAmend)
	case "tools/call":
		o, ok := s.taskOps[params.Name]
		if !ok || len(params.Task) == 0 || string(params.Task) == "null" {
			return false
		}
		writeRPC(w, m.ID)(s.createTask(r.Context(), o, params.Arguments, params.Task))
	case "tasks/get":
		writeRPC(w, m.ID)(s.getTask(r.Context(), params.TaskID))
	case "tasks/result":
		writeRPC(w, m.ID)(s.taskResult(r.Context(), params.TaskID))
	case "tasks/cancel":
		writeRPC(w, m.ID)(s.cancelTask(r.Context(), params.TaskID))
	case "tasks/list":
		writeRPC(w, m.ID)(s.listTasks(r.Context(), params.Cursor))
	default:
		return false
	}
	return true
}

// task is MCP's Task.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"` // ms from createdAt the task is kept at least: see maxTaskTTL
	PollInterval  int    `json:"pollInterval"`
}

// taskOf maps an operation to a task: SCHEDULED and IN_PROGRESS are
// working, the final statuses map one to one.
func taskOf(op orchestrator.Operation) task {
	t := task{
		TaskID: op.ID, CreatedAt: op.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: op.UpdatedAt.UTC().Format(time.RFC3339Nano), PollInterval: taskPollInterval,
		TTL: maxTaskTTL,
	}
	if op.TaskTTLMs != nil {
		t.TTL = *op.TaskTTLMs
	}
	switch op.Status {
	case orchestrator.OpSucceeded:
		t.Status = "completed"
	case orchestrator.OpFailed:
		t.Status, t.StatusMessage = "failed", op.Error
	case orchestrator.OpCancelled:
		t.Status, t.StatusMessage = "cancelled", op.Error
	default:
		t.Status, t.StatusMessage = "working", op.Status
	}
	return t
}

// maxTaskTTL is the longest ttl, in ms, berth grants a task: a week.
// berth deletes no operation, so every task outlives any ttl; the ttl
// granted is recorded with the operation (every replica reports it), and
// a task that asked none, or was created by the extension, whose client
// asks none, reports the cap.
const maxTaskTTL int64 = 7 * 24 * 60 * 60 * 1000

// grantTTL is the ttl granted for params.task of a tools/call: the one
// asked, at most maxTaskTTL, or maxTaskTTL when none is asked.
func grantTTL(raw json.RawMessage) (int64, error) {
	var p struct {
		TTL *int64 `json:"ttl"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, wire.Errorf(wire.CodeBadRequest, "task: want {\"ttl\": milliseconds}, got %.40s", raw)
	}
	switch {
	case p.TTL == nil || *p.TTL > maxTaskTTL:
		return maxTaskTTL, nil
	case *p.TTL < 0:
		return 0, wire.Errorf(wire.CodeBadRequest, "task.ttl: want milliseconds (0 to %d), got %d", maxTaskTTL, *p.TTL)
	}
	return *p.TTL, nil
}

// createTask starts a task tool's operation without waiting for it and
// answers CreateTaskResult with the ttl granted for taskReq.
func (s *Server) createTask(ctx context.Context, o catalog.Op, args, taskReq json.RawMessage) (any, error) {
	ttl, err := grantTTL(taskReq)
	if err != nil {
		return nil, err
	}
	op, err := s.startTask(ctx, o, args)
	if err != nil {
		return nil, err
	}
	// The operation already runs: failing the call would hide its taskId
	// and invite a second run. Unrecorded, the ttl reported later is the
	// cap, which berth keeps all the same.
	if err := s.svc.SetTaskTTL(ctx, principal(ctx), op.ID, ttl); err != nil {
		s.opts.Logger.Warn("task ttl not recorded; tasks/get will report the cap", "task", op.ID, "err", err)
	}
	op.TaskTTLMs = &ttl
	return map[string]any{"task": taskOf(op)}, nil
}

// startTask starts a task tool's operation without waiting for it; both
// forms of tasks create theirs so.
func (s *Server) startTask(ctx context.Context, o catalog.Op, args json.RawMessage) (orchestrator.Operation, error) {
	args, err := noWait(orEmpty(args), o.IdeGYM != "")
	if err != nil {
		return orchestrator.Operation{}, err
	}
	observe.RequestFrom(ctx).SetTool(o.Tool())
	ctx, done := s.toolStarts[o.Tool()](ctx)
	var res any
	in, err := o.Decode(args, nil)
	if err == nil {
		res, err = o.Call(ctx, principal(ctx), in)
	}
	done(err)
	if err != nil {
		return orchestrator.Operation{}, err
	}
	op, ok := res.(orchestrator.Operation)
	if !ok {
		return orchestrator.Operation{}, wire.Errorf(wire.CodeInternal, "tool %s answered no operation", o.Tool())
	}
	return op, nil
}

// noWait returns a tool's own arguments (unwrapped from `request` for
// IdeGYM's tools) with wait_seconds 0: a task answers at once and is
// waited for with tasks/result.
func noWait(args json.RawMessage, wrapped bool) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil || fields == nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "arguments: want a JSON object, got %.40s", args)
	}
	if wrapped {
		inner, ok := fields["request"]
		if !ok || len(fields) != 1 {
			return nil, wire.Errorf(wire.CodeBadRequest, "arguments: want only %q (IdeGYM's tools take their fields inside it)", "request")
		}
		return noWait(inner, false)
	}
	fields["wait_seconds"] = json.RawMessage("0")
	return json.Marshal(fields)
}

func (s *Server) getTask(ctx context.Context, id string) (any, error) {
	op, err := s.svc.GetOperation(ctx, principal(ctx), id, 0)
	if err != nil {
		return nil, err
	}
	return taskOf(op), nil
}

// maxResultWait is how long one wait of tasks/result lasts before it
// waits again; the request waits until the task ends or the client goes.
const maxResultWait = 300

// taskResult waits for the task to end and answers the CallToolResult
// its tool would have answered given time to wait, with isError when the
// operation did not succeed.
func (s *Server) taskResult(ctx context.Context, id string) (any, error) {
	var op orchestrator.Operation
	for {
		var err error
		op, err = s.svc.GetOperation(ctx, principal(ctx), id, maxResultWait)
		if err != nil {
			return nil, err
		}
		if op.Status == orchestrator.OpSucceeded || op.Status == orchestrator.OpFailed || op.Status == orchestrator.OpCancelled {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return s.toolResult(op)
}

// toolResult is the CallToolResult of a finished task: its tool's own
// answer, with isError unless the operation succeeded.
func (s *Server) toolResult(op orchestrator.Operation) (map[string]any, error) {
	b, err := wire.Marshal(s.toolAnswer(op))
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"content":           []map[string]string{{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
		"isError":           op.Status != orchestrator.OpSucceeded,
		"_meta":             map[string]any{relatedTaskMeta: map[string]string{"taskId": op.ID}},
	}, nil
}

// toolAnswer is a finished task's operation as its tool answers it.
func (s *Server) toolAnswer(op orchestrator.Operation) any {
	if o, ok := s.taskOps[op.Type]; ok {
		return o.MCPAnswer(op)
	}
	return op
}

func (s *Server) cancelTask(ctx context.Context, id string) (any, error) {
	op, err := s.svc.CancelOperation(ctx, principal(ctx), id)
	if err != nil {
		return nil, err
	}
	return taskOf(op), nil
}

func (s *Server) listTasks(ctx context.Context, cursor string) (any, error) {
	page, err := s.svc.MyOperations(ctx, principal(ctx), orchestrator.OperationFilter{}, cursor, 0)
	if err != nil {
		return nil, err
	}
	tasks := make([]task, len(page.Operations))
	for i, op := range page.Operations {
		tasks[i] = taskOf(op)
	}
	out := map[string]any{"tasks": tasks}
	if page.NextCursor != "" {
		out["nextCursor"] = page.NextCursor
	}
	return out, nil
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// rpcErrorOf is the JSON-RPC error for a service error: the caller's
// mistakes (unknown or foreign task, bad input, a task already finished)
// are invalid params, as the tasks specification asks, the rest internal
// errors; the message ends with berth's code.
func rpcErrorOf(d wire.ErrorDetail, data any) rpcError {
	code := codeInternal
	switch d.Code {
	case wire.CodeBadRequest, wire.CodeNotFound, wire.CodeConflict, wire.CodeForbidden:
		code = codeInvalidParams
	}
	return rpcError{Code: code, Message: d.Message + " (" + d.Code + ")", Data: data}
}

// writeRPC returns a function that answers a request with its result, or
// with a JSON-RPC error for a service error: the caller's mistakes
// (unknown or foreign task, bad input, a task already finished) are
// invalid params, as the tasks specification asks.
func writeRPC(w http.ResponseWriter, id json.RawMessage) func(any, error) {
	return func(result any, err error) {
		msg := map[string]any{"jsonrpc": "2.0", "id": id}
		if err != nil {
			d := wire.DetailOf(err)
			if errors.Is(store.Classify(err), store.ErrUnavailable) {
				d = wire.ErrorDetail{Code: wire.CodeUnavailable, Message: store.UnavailableMessage}
			}
			msg["error"] = rpcErrorOf(d, nil)
		} else {
			msg["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
	}
}
