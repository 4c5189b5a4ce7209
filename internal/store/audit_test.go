package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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

// TestAuditFilters reads the log by each filter, by time and in pages.
func TestAuditFilters(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		actor, ns := alice, "team-a"
		if i%2 == 1 {
			actor, ns = bob, "team-b"
		}
		action := "server.exec"
		if i%3 == 0 {
			action = "server.create"
		}
		e := store.AuditEntry{At: t0.Add(time.Duration(i) * time.Hour), ActorID: actor.ID, Actor: actor.Username, Action: action,
			TargetKind: "server", TargetID: fmt.Sprintf("srv-%d", i%4), Namespace: ns, Outcome: store.OutcomeOK}
		if err := s.Audit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	hours := func(f store.AuditFilter) []int {
		t.Helper()
		es, err := s.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []int{}
		for _, e := range es {
			out = append(out, int(e.At.Sub(t0)/time.Hour))
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    store.AuditFilter
		want []int
	}{
		{"actor", store.AuditFilter{ActorID: bob.ID}, []int{9, 7, 5, 3, 1}},
		{"action", store.AuditFilter{Action: "server.create"}, []int{9, 6, 3, 0}},
		{"target", store.AuditFilter{TargetKind: "server", TargetID: "srv-1"}, []int{9, 5, 1}},
		{"other kind", store.AuditFilter{TargetKind: "client", TargetID: "srv-1"}, []int{}},
		{"namespace", store.AuditFilter{Namespace: "team-a", Action: "server.exec"}, []int{8, 4, 2}},
		{"time range", store.AuditFilter{Since: t0.Add(2 * time.Hour), Until: t0.Add(5 * time.Hour)}, []int{4, 3, 2}},
		{"not a uuid", store.AuditFilter{ActorID: "alice"}, []int{}},
	} {
		if got := hours(c.f); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: entries of hours %v, want %v", c.name, got, c.want)
		}
	}

	// Pages: each starts below the last id of the one before.
	var seen []int
	f := store.AuditFilter{ActorID: alice.ID, Limit: 2}
	for range 4 {
		es, err := s.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			seen = append(seen, int(e.At.Sub(t0)/time.Hour))
		}
		if len(es) < f.Limit {
			break
		}
		f.BeforeID = es[len(es)-1].ID
	}
	if fmt.Sprint(seen) != "[8 6 4 2 0]" {
		t.Errorf("pages of 2: hours %v, want [8 6 4 2 0]", seen)
	}
}

// TestAuditQueriesUseIndexes checks that each filter a reader may give
// alone can be answered from an index in page order: the log only grows.
func TestAuditQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// With so few rows a sequential scan always wins; turning it off
	// shows which index the planner would use once the log is long.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for col, index := range map[string]string{
		"actor_id": "audit_log_actor_id_idx", "action": "audit_log_action_idx",
		"target_id": "audit_log_target_id_idx", "namespace": "audit_log_namespace_idx",
	} {
		v := "x"
		if col == "actor_id" {
			v = "00000000-0000-0000-0000-000000000000"
		}
		var plan strings.Builder
		rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN SELECT id FROM audit_log WHERE %s = $1 AND id < $2 ORDER BY id DESC LIMIT 100", col), v, int64(1000))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			rows.Scan(&line)
			plan.WriteString(line + "\n")
		}
		rows.Close()
		if !strings.Contains(plan.String(), index) || strings.Contains(plan.String(), "Sort") {
			t.Errorf("filter on %s: plan does not read %s in order:\n%s", col, index, plan.String())
		}
	}
}
