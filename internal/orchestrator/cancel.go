package orchestrator

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// cancelAction is what cancelling an operation counts as: the action that
// started it, so a token that could start the work can stop it and a
// read-only one cannot.
func cancelAction(opType string) rbac.Action {
	switch opType {
	case opStartServer, opWarmServer, opRecoverServer:
		return rbac.ActionServerCreate
	case opRestartServer:
		return rbac.ActionServerUpdate
	case opStopServer:
		return rbac.ActionServerDelete
	case opBuildImage:
		return rbac.ActionImageBuild
	default:
		return rbac.ActionServerExec
	}
}

// CancelOperation cancels an operation that has not finished: it becomes
// CANCELLED durably at once, and the replica running it (whichever it is)
// hears of it through the operations notification and stops the work
// (worker.go). Only its owner or an admin of its namespace may; an
// operation that already finished answers a conflict naming its status.
func (s *Service) CancelOperation(ctx context.Context, p rbac.Principal, id string) (Operation, error) {
	op, err := s.readableOperation(ctx, p, id)
	if err != nil {
		return Operation{}, err
	}
	if err := rbac.Authorize(p, cancelAction(op.Type), operationResource(op)); err != nil {
		return Operation{}, err
	}
	if op.Type == opStopServer && !operationDone(op) {
		// A server left STOPPING would only be stopped again (see
		// finishLostStops): a stop, once asked for, is done.
		return Operation{}, wire.Errorf(wire.CodeConflict, "operation %s stops server %s and cannot be cancelled; it finishes on its own", op.ID, op.ServerID)
	}
	msg := fmt.Sprintf("cancelled by %s", p.Username)
	ok, err := s.store.FinishOperation(ctx, op.ID, "", OpCancelled, nil, "cancelled", msg)
	if err != nil {
		return Operation{}, fmt.Errorf("cancel operation %s: %w", op.ID, err)
	}
	cur, err := s.store.OperationByID(ctx, op.ID)
	if err != nil {
		return Operation{}, err
	}
	if !ok {
		return Operation{}, wire.Errorf(wire.CodeConflict, "operation %s already finished: %s", op.ID, cur.Status)
	}
	if startsServer(op.Type) && op.ServerID != "" {
		// Nothing will finish this start now: the server must not stay
		// STARTING, holding a place in the quota; the watcher deletes
		// its sandbox.
		s.store.SetServerStatus(context.WithoutCancel(ctx), op.ServerID, ServerFailed, msg, ServerStarting)
	}
	// A command runs on its agent apart from any replica's request: the
	// agent ends it when told (the replica running it, if it cannot be
	// reached from here, stops it on hearing of the cancel).
	s.stopRun(context.WithoutCancel(ctx), op)
	s.audit(ctx, p, "operation.cancel", "operation", op.ID, op.Namespace, "ok", map[string]any{"type": op.Type})
	return operationView(cur), nil
}

// OperationPage is a page of the caller's operations, newest first.
type OperationPage struct {
	Operations []Operation `json:"operations"`
	// NextCursor, when set, continues the list after this page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// OperationFilter narrows MyOperations; empty fields match all.
type OperationFilter struct {
	Status   string `json:"status,omitempty" jsonschema:"only operations in this status: SCHEDULED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED"`
	Type     string `json:"type,omitempty" jsonschema:"only operations of this type: start_server, restart_server, stop_server, run_bash_command, run_tests, recover_server or build_image"`
	ServerID string `json:"server_id,omitempty" jsonschema:"only operations on this server"`
}

// OperationStatuses and OperationTypes are the values OperationFilter
// accepts, in the order a list offers them.
var (
	OperationStatuses = []string{OpScheduled, OpInProgress, OpSucceeded, OpFailed, OpCancelled}
	OperationTypes    = []string{opStartServer, opRestartServer, opStopServer, opRunBash, opRunTests, opRecoverServer, opBuildImage}
)

func (f OperationFilter) check() error {
	if f.Status != "" && !slices.Contains(OperationStatuses, f.Status) {
		return wire.Errorf(wire.CodeBadRequest, "status: want one of %s, got %q", strings.Join(OperationStatuses, ", "), f.Status)
	}
	if f.Type != "" && !slices.Contains(OperationTypes, f.Type) {
		return wire.Errorf(wire.CodeBadRequest, "type: want one of %s, got %q", strings.Join(OperationTypes, ", "), f.Type)
	}
	if f.ServerID != "" && !store.IsUUID(f.ServerID) {
		return wire.Errorf(wire.CodeBadRequest, "server_id: want a server id, got %q", f.ServerID)
	}
	return nil
}

// MyOperations lists the caller's own operations that match f, newest
// first, limit a page (default 50, at most 100); cursor is a NextCursor
// of a previous page with the same filter. Nobody sees another user's
// operations here, admins included.
func (s *Service) MyOperations(ctx context.Context, p rbac.Principal, f OperationFilter, cursor string, limit int) (OperationPage, error) {
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 100:
		return OperationPage{}, wire.Errorf(wire.CodeBadRequest, "limit: want 1 to 100 operations, got %d", limit)
	}
	if err := f.check(); err != nil {
		return OperationPage{}, err
	}
	after, err := decodeOperationCursor(cursor)
	if err != nil {
		return OperationPage{}, err
	}
	ops, err := s.store.OwnerOperations(ctx, p.UserID, store.OperationFilter(f), after, limit+1)
	if err != nil {
		return OperationPage{}, err
	}
	page := OperationPage{}
	if len(ops) > limit {
		ops = ops[:limit]
		last := ops[limit-1]
		page.NextCursor = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d/%s", last.CreatedAt.UnixNano(), last.ID))
	}
	page.Operations = operationViews(ops)
	return page, nil
}

func decodeOperationCursor(cursor string) (store.OperationCursor, error) {
	if cursor == "" {
		return store.OperationCursor{}, nil
	}
	bad := wire.Errorf(wire.CodeBadRequest, "cursor: want a next cursor of an earlier page, got %q", cursor)
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return store.OperationCursor{}, bad
	}
	nanos, id, ok := strings.Cut(string(b), "/")
	var n int64
	if _, err := fmt.Sscanf(nanos, "%d", &n); !ok || err != nil || !store.IsUUID(id) {
		return store.OperationCursor{}, bad
	}
	return store.OperationCursor{CreatedAt: time.Unix(0, n), ID: id}, nil
}
