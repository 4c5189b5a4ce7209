package store_test

import (
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestInsertAuditedOperation: one statement records the operation, claimed
// for its first run, and the audit entry naming it; a finish returns the
// operation as a read would show it.
func TestInsertAuditedOperation(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	op, err := s.InsertAuditedOperation(ctx, store.NewOperation{
		Type: "run_bash_command", OwnerID: u.ID, Namespace: "default", ClaimFor: "r1", Lease: time.Minute,
	}, store.AuditEntry{ActorID: u.ID, Actor: "alice", Action: "server.exec", TargetKind: "server", TargetID: "s1",
		Namespace: "default", Outcome: "ok", Detail: map[string]any{"kind": "run_bash_command"}})
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != "IN_PROGRESS" || op.Attempts != 1 || op.OwnerID != u.ID {
		t.Fatalf("inserted %+v: want IN_PROGRESS, attempt 1, owned by alice", op)
	}
	entries, err := s.ListAudit(ctx, store.AuditFilter{Action: "server.exec"})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Detail["operation_id"] != op.ID || entries[0].Detail["kind"] != "run_bash_command" ||
		entries[0].ActorID != u.ID || entries[0].Outcome != "ok" {
		t.Fatalf("audit entries %+v: want one naming operation %s", entries, op.ID)
	}

	result := `{"exit_code":0}`
	done, ok, err := s.FinishedOperation(ctx, op, store.LeaseHolder("r1", 1), "SUCCEEDED", &result, "", "")
	if err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	read, err := s.OperationByID(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != read.Status || *done.Result != *read.Result || !done.UpdatedAt.Equal(read.UpdatedAt) || done.Attempts != read.Attempts {
		t.Fatalf("finish returned %+v, a read shows %+v", done, read)
	}
	if _, ok, err := s.FinishedOperation(ctx, op, store.LeaseHolder("r1", 1), "FAILED", nil, "internal", "late"); err != nil || ok {
		t.Fatalf("second finish: %v %v, want not recorded", ok, err)
	}

	_, err = s.InsertAuditedOperation(ctx, store.NewOperation{Type: "run_bash_command", Namespace: "default"},
		store.AuditEntry{ActorID: "nope", Action: "server.exec"})
	wantCode(t, err, wire.CodeBadRequest, "actor_id", "nope")
}
