package store_test

import (
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/jackc/pgx/v5"
)

// TestOperationLeases: a claim's lease belongs to that claim. Once it
// expired, even the same replica's next claim takes it from the first,
// which can then neither renew nor finish the operation.
func TestOperationLeases(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	var id string
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		op, err := store.InsertOperation(ctx, tx, store.NewOperation{Type: "start_server", Namespace: "default"})
		id = op.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A lease that ends at once stands for renewals that came too late.
	first, ok, err := s.ClaimOperation(ctx, "r1", "", -time.Second)
	if err != nil || !ok || first.ID != id || first.Attempts != 1 || first.Status != "IN_PROGRESS" {
		t.Fatalf("first claim: %+v %v %v", first, ok, err)
	}
	second, ok, err := s.ClaimOperation(ctx, "r1", "", time.Minute)
	if err != nil || !ok || second.ID != id || second.Attempts != 2 {
		t.Fatalf("claim of the expired lease: %+v %v %v", second, ok, err)
	}
	if _, ok, _ := s.ClaimOperation(ctx, "r2", "", time.Minute); ok {
		t.Fatal("an operation under a live lease was claimed")
	}
	old, cur := store.LeaseHolder("r1", 1), store.LeaseHolder("r1", 2)
	if ok, err := s.RenewLease(ctx, id, old, time.Minute); err != nil || ok {
		t.Fatalf("the first claim renewed a lease it lost: %v %v", ok, err)
	}
	if ok, err := s.FinishOperation(ctx, id, old, "SUCCEEDED", nil, "", ""); err != nil || ok {
		t.Fatalf("the first claim finished an operation it lost: %v %v", ok, err)
	}
	if ok, err := s.RenewLease(ctx, id, cur, time.Minute); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	result := `{"ok":true}`
	if ok, err := s.FinishOperation(ctx, id, cur, "SUCCEEDED", &result, "", ""); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	done, err := s.OperationByID(ctx, id)
	if err != nil || done.Status != "SUCCEEDED" || done.Result == nil || *done.Result != result {
		t.Fatalf("finished operation %+v %v", done, err)
	}
	if ok, _ := s.FinishOperation(ctx, id, "", "FAILED", nil, "internal", "late"); ok {
		t.Fatal("a finished operation was finished again")
	}
}

// TestInsertFinishedOperation: an operation inserted with its result is
// done at once and never offered to workers.
func TestInsertFinishedOperation(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	result := `{"server_id":"x"}`
	var op store.Operation
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		op, err = store.InsertOperation(ctx, tx, store.NewOperation{Type: "start_server", Namespace: "default", Result: &result})
		return err
	})
	if err != nil || op.Status != "SUCCEEDED" || op.Result == nil || *op.Result != result {
		t.Fatalf("inserted %+v %v", op, err)
	}
	if _, ok, err := s.ClaimOperation(ctx, "r1", "", time.Minute); err != nil || ok {
		t.Fatalf("a finished operation was claimed (%v)", err)
	}
}

// TestOperationAppendJSON: the text built at its final size is what
// wire.Marshal gives, with a result and without.
func TestOperationAppendJSON(t *testing.T) {
	result := "{\"body\":\"<\\\\u0000>\"}\x00\xff"
	for _, op := range []store.Operation{
		{ID: "a", Type: "t", Status: "SUCCEEDED", ServerID: "s", Result: &result, CreatedAt: time.Unix(1, 0).UTC()},
		{ID: "b", Type: "t", Status: "FAILED", Error: `"result":null`, ErrorCode: "internal"},
	} {
		want, err := wire.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		got, err := op.AppendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("AppendJSON = %s, %v; Marshal gives %s", got, err, want)
		}
	}
}

// TestClaimByRuntimeOwner: a replica claims operations of no server and
// on servers whose sandbox its runtime owner may act on (its own, or
// placed nowhere yet), never another owner's, not even one whose lease
// ran out; a replica whose runtime names no owner claims everything.
func TestClaimByRuntimeOwner(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	ops := map[string]string{} // operation id -> the owner of its server
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		for _, owner := range []string{"local-a", "local-b", "", "none"} {
			n := store.NewOperation{Type: "start_server", Namespace: "default"}
			if owner != "none" {
				srv, err := store.InsertServer(ctx, tx, store.NewServer{Namespace: "default", ServerName: "s", ImageTag: "img",
					Status: "STARTING", RuntimeOwner: owner})
				if err != nil {
					return err
				}
				n.ServerID = srv.ID
			}
			op, err := store.InsertOperation(ctx, tx, n)
			if err != nil {
				return err
			}
			ops[op.ID] = owner
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// B's operation, claimed by B with a lease that ends at once: B died.
	bs, ok, err := s.ClaimOperation(ctx, "b", "local-b", -time.Second)
	if err != nil || !ok || ops[bs.ID] != "local-b" {
		t.Fatalf("B's claim: %+v %v %v", bs, ok, err)
	}
	got := map[string]bool{}
	for {
		op, ok, err := s.ClaimOperation(ctx, "a", "local-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got[ops[op.ID]] = true
	}
	if len(got) != 3 || !got["local-a"] || !got[""] || !got["none"] {
		t.Fatalf("A claimed operations on servers of %v, want its own, the unplaced one's and the serverless one", got)
	}
	if op, ok, err := s.ClaimOperation(ctx, "any", "", time.Minute); err != nil || !ok || op.ID != bs.ID {
		t.Fatalf("a replica with no runtime owner claims %+v %v %v, want B's expired operation", op, ok, err)
	}
}
