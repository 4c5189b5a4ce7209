package store_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestAuditRoundTrip(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	tok, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("secret-token"), Prefix: "secret-token"[:6]})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	detail := map[string]any{"image": "ubuntu:24.04", "cpus": 2.0, "labels": []any{"a", "b"}, "nested": map[string]any{"ok": true}}
	in := store.AuditEntry{At: at, ActorID: u.ID, Actor: "alice", TokenID: tok.ID, Action: "server.create",
		TargetKind: "server", TargetID: "srv-1", Namespace: "team-a", Outcome: store.OutcomeOK, Detail: detail}
	if err := s.Audit(ctx, in); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute)
	if err := s.Audit(ctx, store.AuditEntry{Actor: "anonymous", Action: "login", Outcome: store.OutcomeDenied}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListAudit(ctx, store.AuditFilter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("ListAudit: %+v, %v", all, err)
	}
	// Newest first; zero At means now; nil detail stays nil.
	if all[0].Action != "login" || all[0].At.Before(before) || all[0].Detail != nil || all[0].ActorID != "" || all[0].TokenID != "" {
		t.Fatalf("second entry %+v", all[0])
	}
	got := all[1]
	if got.ID == 0 || !got.At.Equal(at) || got.ActorID != u.ID || got.TokenID != tok.ID || got.TargetID != "srv-1" || got.Namespace != "team-a" {
		t.Fatalf("first entry %+v", got)
	}
	if !reflect.DeepEqual(got.Detail, detail) {
		t.Fatalf("detail %#v, want %#v", got.Detail, detail)
	}
	// The entry holds what it was given and nothing of the token.
	raw, _ := json.Marshal(got)
	for _, secret := range [][]byte{[]byte("secret-token"), hashOf("secret-token")} {
		if bytes.Contains(raw, secret) {
			t.Fatalf("audit entry holds token material: %s", raw)
		}
	}

	byActor, err := s.ListAudit(ctx, store.AuditFilter{ActorID: u.ID})
	if err != nil || len(byActor) != 1 || byActor[0].Action != "server.create" {
		t.Fatalf("by actor: %+v, %v", byActor, err)
	}
	byTarget, err := s.ListAudit(ctx, store.AuditFilter{TargetID: "srv-1", ActorID: u.ID})
	if err != nil || len(byTarget) != 1 {
		t.Fatalf("by target: %+v, %v", byTarget, err)
	}
	none, err := s.ListAudit(ctx, store.AuditFilter{TargetID: "srv-2"})
	if err != nil || len(none) != 0 {
		t.Fatalf("other target: %+v, %v", none, err)
	}
	limited, err := s.ListAudit(ctx, store.AuditFilter{Limit: 1})
	if err != nil || len(limited) != 1 || limited[0].Action != "login" {
		t.Fatalf("limit 1: %+v, %v", limited, err)
	}
}

func TestAuditRejectsBadEntries(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	wantCode(t, s.Audit(ctx, store.AuditEntry{Action: "x", Outcome: "maybe"}), wire.CodeBadRequest, "outcome")
	wantCode(t, s.Audit(ctx, store.AuditEntry{Outcome: store.OutcomeOK}), wire.CodeBadRequest, "action")
	wantCode(t, s.Audit(ctx, store.AuditEntry{Action: "x", Outcome: store.OutcomeOK, ActorID: "alice"}), wire.CodeBadRequest, "actor_id")
	wantCode(t, s.Audit(ctx, store.AuditEntry{Action: "x", Outcome: store.OutcomeOK, TokenID: "t1"}), wire.CodeBadRequest, "token_id")
	if n := count(t, s, `SELECT count(*) FROM audit_log`); n != 0 {
		t.Fatalf("%d rejected entries stored", n)
	}
}
