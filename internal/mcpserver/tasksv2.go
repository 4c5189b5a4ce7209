package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks extension of protocol 2026-07-28 (io.modelcontextprotocol/
// tasks, SEP-2663), beside the experimental tasks of 2025-11-25
// (tasks.go). The client opts in per request, by naming the extension in
// params._meta["io.modelcontextprotocol/clientCapabilities"].extensions;
// a request that does not is served the 2025-11-25 way, so a client of
// either generation gets the form it speaks. Both forms are the same
// durable operations: a taskId of one is the taskId of the other.
//
// What changes for such a request: a task tool's tools/call always
// answers a task (the server decides, the client sends no params.task),
// flat with resultType "task"; tasks/get carries the final result
// inline; tasks/cancel and tasks/update answer an empty acknowledgement;
// there is no tasks/result, and tasks/list answers the caller's tasks
// (berth lists them as it does for 2025-11-25). The rest is the go-sdk's,
// which serves the 2026-07-28 base protocol itself (server/discover,
// per-request _meta, resultType "complete") on a stateless handler.

// tasksExtension names the extension in capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// clientCapabilitiesMeta is the _meta key of a 2026 request's
// capabilities.
const clientCapabilitiesMeta = "io.modelcontextprotocol/clientCapabilities"

// extensionCapabilities declares the extension; the go-sdk answers it in
// server/discover (2026-07-28) and in initialize, and infers the rest.
func extensionCapabilities() *mcp.ServerCapabilities {
	c := &mcp.ServerCapabilities{}
	c.AddExtension(tasksExtension, nil)
	return c
}

// codeMethodNotFound is JSON-RPC's "no such method".
const codeMethodNotFound = -32601

// declaresTasksExtension reports whether a request's params opt into the
// extension: its per-request capabilities name it with an object (the
// extension defines no settings, but a null or a string is no opt-in).
func declaresTasksExtension(params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta[clientCapabilitiesMeta], &caps) != nil {
		return false
	}
	var settings map[string]json.RawMessage
	ext, ok := caps.Extensions[tasksExtension]
	return ok && json.Unmarshal(ext, &settings) == nil && settings != nil
}

// serveTasksExtension answers a request that opted into the extension,
// and reports whether it did; the rest goes on to the SDK unchanged.
func (s *Server) serveTasksExtension(w http.ResponseWriter, r *http.Request, m rpcMessage, params taskParams, jsonHandler http.Handler) bool {
	ctx := r.Context()
	switch m.Method {
	case "tools/call":
		if _, ok := s.taskOps[params.Name]; !ok {
			return false
		}
	case "tasks/result":
		writeRPCCode(w, m.ID, codeMethodNotFound, m.Method+" is not part of the tasks extension (io.modelcontextprotocol/tasks): tasks/get carries the result")
		return true
	}
	if msg := headerMismatch(r.Header, m.Method, params); msg != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		writeRPCCode(w, m.ID, mcp.CodeHeaderMismatch, msg)
		return true
	}
	switch m.Method {
	case "tools/call":
		o := s.taskOps[params.Name]
		writeRPC(w, m.ID)(s.createTaskV2(ctx, o, params.Arguments))
	case "tools/list":
		s.amend(w, r, jsonHandler, s.listAmend)
	case "tasks/get":
		writeRPC(w, m.ID)(s.getTaskV2(ctx, params.TaskID))
	case "tasks/cancel":
		writeRPC(w, m.ID)(s.cancelTaskV2(ctx, params.TaskID))
	case "tasks/update":
		writeRPC(w, m.ID)(s.updateTaskV2(ctx, params.TaskID, m.Params))
	case "tasks/list":
		writeRPC(w, m.ID)(s.listTasksV2(ctx, params.Cursor))
	default:
		return false
	}
	return true
}

// taskV2 is the extension's Task, with the payload of its status inline
// (DetailedTask) when tasks/get answers it.
type taskV2 struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"` // the client asks none here: maxTaskTTL
	PollIntervalMs int             `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *rpcError       `json:"error,omitempty"`
}

// taskV2Of maps an operation as taskOf does; the fields are the same
// under the extension's names.
func taskV2Of(op orchestrator.Operation, resultType string) taskV2 {
	t := taskOf(op)
	return taskV2{
		ResultType: resultType, TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTLMs: t.TTL, PollIntervalMs: t.PollInterval,
	}
}

// createTaskV2 starts a task tool's operation and answers
// CreateTaskResult.
func (s *Server) createTaskV2(ctx context.Context, o catalog.Op, args json.RawMessage) (any, error) {
	op, err := s.startTask(ctx, o, args)
	if err != nil {
		return nil, err
	}
	return taskV2Of(op, "task"), nil
}

// getTaskV2 answers the task with, once it ended, its outcome inline: the
// CallToolResult of a SUCCEEDED operation, or the JSON-RPC error of a
// FAILED one. A failed operation is a failed task in both forms of tasks
// (2025-11-25 counts a tool result with isError as failed): the extension
// keeps "failed" for a request that ended in a JSON-RPC error, so a task
// tool's call whose operation failed ends in one here, carrying the
// operation's error (its message, berth's code, and in data the tool's
// answer, the failed operation).
func (s *Server) getTaskV2(ctx context.Context, id string) (any, error) {
	if err := needTaskID(id); err != nil {
		return nil, err
	}
	op, err := s.svc.GetOperation(ctx, principal(ctx), id, 0)
	if err != nil {
		return nil, err
	}
	t := taskV2Of(op, "complete")
	switch op.Status {
	case orchestrator.OpSucceeded:
		res, err := s.toolResult(op)
		if err != nil {
			return nil, err
		}
		res["resultType"] = "complete"
		if t.Result, err = json.Marshal(res); err != nil {
			return nil, err
		}
	case orchestrator.OpFailed:
		e := rpcErrorOf(wire.ErrorDetail{Code: op.ErrorCode, Message: op.Error}, s.toolAnswer(op))
		t.Error = &e
	}
	return t, nil
}

// cancelTaskV2 cancels a running task. A task that already ended is
// acknowledged as well: cancellation in the extension is a request the
// server may find too late, and tasks/get then shows how the task ended.
func (s *Server) cancelTaskV2(ctx context.Context, id string) (any, error) {
	if err := needTaskID(id); err != nil {
		return nil, err
	}
	if _, err := s.svc.CancelOperation(ctx, principal(ctx), id); err != nil && wire.DetailOf(err).Code != wire.CodeConflict {
		return nil, err
	}
	return complete, nil
}

// updateTaskV2 acknowledges input for a task of the caller's. berth's
// tasks never ask for input, so no key is ever outstanding and the
// extension says to ignore responses to such keys; the shape is still
// checked so a malformed update is not silently taken.
func (s *Server) updateTaskV2(ctx context.Context, id string, params json.RawMessage) (any, error) {
	if err := needTaskID(id); err != nil {
		return nil, err
	}
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(params, &p)
	var responses map[string]json.RawMessage
	if json.Unmarshal(p.InputResponses, &responses) != nil || responses == nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "inputResponses: want an object of responses by input key, got %.40s", p.InputResponses)
	}
	if _, err := s.svc.GetOperation(ctx, principal(ctx), id, 0); err != nil {
		return nil, err
	}
	return complete, nil
}

// headerMismatch checks, for a request of 2026-07-28 or later, the
// Streamable HTTP headers the go-sdk checks on the requests it serves:
// the task layer answers these before it, and a load balancer routes on
// Mcp-Name, so a header that disagrees with the body is refused rather
// than trusted or ignored.
func headerMismatch(h http.Header, method string, params taskParams) string {
	if h.Get("Mcp-Protocol-Version") < "2026-07-28" {
		return ""
	}
	if got := h.Get("Mcp-Method"); got != method {
		return fmt.Sprintf("Mcp-Method header: want %q (the body's method), got %q", method, got)
	}
	name, field := params.TaskID, "taskId"
	if method == "tools/call" {
		name, field = params.Name, "tool name"
	}
	// Mcp-Name is checked only when sent: a client that leaves it out
	// asked nothing a load balancer could have routed wrongly.
	if got, sent := h["Mcp-Name"]; sent && (len(got) != 1 || got[0] != name) {
		got := h.Get("Mcp-Name")
		return fmt.Sprintf("Mcp-Name header: want %q (the body's %s), got %q", name, field, got)
	}
	return ""
}

// listTasksV2 answers the caller's tasks, newest first, a page at a time:
// they are the caller's operations in PostgreSQL, so any replica lists
// them, and each in the form tasks/get answers without its outcome.
func (s *Server) listTasksV2(ctx context.Context, cursor string) (any, error) {
	page, err := s.svc.MyOperations(ctx, principal(ctx), orchestrator.OperationFilter{}, cursor, 0)
	if err != nil {
		return nil, err
	}
	tasks := make([]taskV2, len(page.Operations))
	for i, op := range page.Operations {
		tasks[i] = taskV2Of(op, "")
	}
	out := map[string]any{"resultType": "complete", "tasks": tasks}
	if page.NextCursor != "" {
		out["nextCursor"] = page.NextCursor
	}
	return out, nil
}

// complete is the empty acknowledgement of tasks/cancel and tasks/update.
var complete = map[string]string{"resultType": "complete"}

func needTaskID(id string) error {
	if id == "" {
		return wire.Errorf(wire.CodeBadRequest, "taskId: want the id a tools/call answered, got none")
	}
	return nil
}

// writeRPCCode answers a request with a JSON-RPC error of its own code.
func writeRPCCode(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": message},
	})
}
