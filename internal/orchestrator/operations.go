package orchestrator

import (
	"context"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

func operationResource(op store.Operation) rbac.Resource {
	return rbac.Resource{Kind: "operation", Namespace: op.Namespace, OwnerID: op.OwnerID}
}

// GetOperation returns an operation. With waitSeconds > 0 it waits up to
// that long for the operation to finish (woken by the database's
// notification, not by polling) and returns it as it then is.
func (s *Service) GetOperation(ctx context.Context, p rbac.Principal, id string, waitSeconds float64) (Operation, error) {
	if err := checkWait(waitSeconds); err != nil {
		return Operation{}, err
	}
	op, err := s.readableOperation(ctx, p, id)
	if err != nil {
		return Operation{}, err
	}
	return withOperationView(s.waitOperation(ctx, op, waitSeconds))
}

// readableOperation returns an operation p may read.
func (s *Service) readableOperation(ctx context.Context, p rbac.Principal, id string) (store.Operation, error) {
	op, err := s.store.OperationByID(ctx, id)
	if err != nil {
		return store.Operation{}, err
	}
	if err := rbac.Authorize(p, rbac.ActionOperationRead, operationResource(op)); err != nil {
		return store.Operation{}, err
	}
	// Operations of nobody (the warm pool's) would pass the ownership
	// check for every member: only admins see them.
	if op.OwnerID == "" && !p.IsAdmin(op.Namespace) {
		return store.Operation{}, wire.Errorf(wire.CodeNotFound, "operation %q not found", id)
	}
	return op, nil
}

// waitOperation waits until op is done, waitSeconds pass, or ctx ends,
// and returns its latest state. It subscribes before re-reading, so a
// notification between the read and the wait cannot be missed.
func (s *Service) waitOperation(ctx context.Context, op store.Operation, waitSeconds float64) (store.Operation, error) {
	if waitSeconds <= 0 || operationDone(op) {
		return op, nil
	}
	timer := time.NewTimer(time.Duration(waitSeconds * float64(time.Second)))
	defer timer.Stop()
	// Until this replica listens (Run not started, or the database was
	// unreachable at start) nothing would wake the waiter: the wait still
	// ends with wait_seconds.
	select {
	case <-s.events.listening:
	case <-timer.C:
		return s.store.OperationByID(ctx, op.ID)
	case <-ctx.Done():
		return op, nil
	}
	changed, unsubscribe := s.events.subscribe(op.ID, everyChange)
	defer unsubscribe()
	progress := progressFrom(ctx)
	last := ""
	for {
		cur, err := s.store.OperationByID(ctx, op.ID)
		if err != nil {
			return op, err
		}
		if now := progressOf(cur); now != last {
			last = now
			progress(operationView(cur))
		}
		if operationDone(cur) {
			return cur, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return s.store.OperationByID(ctx, op.ID)
		case <-ctx.Done():
			return cur, nil
		}
	}
}

// ServerOperations returns the latest operations of a server, newest
// first (for debugging a server).
func (s *Service) ServerOperations(ctx context.Context, p rbac.Principal, serverID string, limit int) ([]Operation, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerRead, serverID, "")
	if err != nil {
		return nil, err
	}
	switch {
	case limit == 0:
		limit = 10
	case limit < 0 || limit > 100:
		return nil, wire.Errorf(wire.CodeBadRequest, "limit: want 1 to 100 operations, got %d", limit)
	}
	ops, err := s.store.ListOperations(ctx, srv.ID, limit)
	if err != nil {
		return nil, err
	}
	return operationViews(ops), nil
}
