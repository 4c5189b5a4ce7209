package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

func auditPage(t testing.TB, svc *orchestrator.Service, p rbac.Principal, q orchestrator.AuditQuery) orchestrator.AuditPage {
	t.Helper()
	page, err := svc.AuditLog(context.Background(), p, q)
	if err != nil {
		t.Fatalf("audit log %+v as %s: %v", q, p.Username, err)
	}
	for i := 1; i < len(page.Entries); i++ {
		if page.Entries[i].ID >= page.Entries[i-1].ID {
			t.Fatalf("audit page not newest first: ids %d then %d", page.Entries[i-1].ID, page.Entries[i].ID)
		}
	}
	return page
}

// users names the users of a page's entries.
func users(page orchestrator.AuditPage) map[string]int {
	out := map[string]int{}
	for _, e := range page.Entries {
		out[e.Username]++
	}
	return out
}

// TestAuditLog reads the audit log as its users do: members their own
// entries only, admins everyone's by each filter and in pages, and an
// admin of one namespace everyone's in that namespace only.
func TestAuditLog(t *testing.T) {
	e := newService(t, orchestrator.Config{})
	svc, ctx := e.Svc, context.Background()
	root := principal(t, svc, "root") // the first user: a global admin
	alice, bob := principal(t, svc, "alice"), principal(t, svc, "bob")
	start := time.Now().Add(-time.Minute)
	var aliceClients []string
	for range 3 {
		aliceClients = append(aliceClients, registerClient(t, svc, alice, "a").ID)
	}
	registerClient(t, svc, bob, "b")
	registerClient(t, svc, bob, "b")

	own := auditPage(t, svc, alice, orchestrator.AuditQuery{})
	if own.Scope != "own" || len(own.Entries) != 3 || users(own)["alice"] != 3 {
		t.Fatalf("alice's page: scope %s, users %v", own.Scope, users(own))
	}
	if got := own.Entries[0]; got.Action != "client.register" || got.ResourceType != "client" || got.ResourceID != aliceClients[2] || got.UserID != alice.UserID || got.Outcome != "ok" {
		t.Errorf("alice's newest entry: %+v", got)
	}
	for _, name := range []string{"alice", "ALICE", alice.UserID} {
		if p := auditPage(t, svc, alice, orchestrator.AuditQuery{User: name}); len(p.Entries) != 3 || p.Scope != "own" {
			t.Errorf("alice naming herself as %q: %d entries, scope %s", name, len(p.Entries), p.Scope)
		}
	}
	for _, name := range []string{"bob", bob.UserID, "nobody"} {
		_, err := svc.AuditLog(ctx, alice, orchestrator.AuditQuery{User: name})
		wantCode(t, err, wire.CodeForbidden)
	}
	// Her attempts to read others' entries are themselves recorded.
	denied := auditPage(t, svc, root, orchestrator.AuditQuery{User: "alice", Action: "audit.read"})
	if len(denied.Entries) != 3 || denied.Entries[0].Outcome != "denied" {
		t.Errorf("alice's refused reads: %+v", denied.Entries)
	}

	if p := auditPage(t, svc, root, orchestrator.AuditQuery{User: "bob"}); p.Scope != "all" || len(p.Entries) != 2 || users(p)["bob"] != 2 {
		t.Errorf("root reading bob's: scope %s, users %v", p.Scope, users(p))
	}
	if p := auditPage(t, svc, root, orchestrator.AuditQuery{ResourceType: "client", ResourceID: aliceClients[0]}); len(p.Entries) != 1 || p.Entries[0].UserID != alice.UserID {
		t.Errorf("by resource: %+v", p.Entries)
	}
	if p := auditPage(t, svc, root, orchestrator.AuditQuery{Action: "client.register", Since: start, Until: time.Now().Add(time.Minute)}); len(p.Entries) != 5 {
		t.Errorf("by time range: %d entries, want 5", len(p.Entries))
	}
	if p := auditPage(t, svc, root, orchestrator.AuditQuery{Since: time.Now().Add(time.Hour)}); len(p.Entries) != 0 || p.NextCursor != "" {
		t.Errorf("from the future: %+v", p)
	}
	_, err := svc.AuditLog(ctx, root, orchestrator.AuditQuery{User: "nobody"})
	wantCode(t, err, wire.CodeNotFound, "nobody")

	// Pages of two: every entry once, and a cursor until the last page.
	seen := map[int64]bool{}
	q := orchestrator.AuditQuery{Action: "client.register", Limit: 2}
	for pages := 1; ; pages++ {
		p := auditPage(t, svc, root, q)
		for _, e := range p.Entries {
			if seen[e.ID] {
				t.Fatalf("entry %d on two pages", e.ID)
			}
			seen[e.ID] = true
		}
		if p.NextCursor == "" {
			if pages != 3 || len(seen) != 5 {
				t.Errorf("%d pages holding %d entries, want 3 holding 5", pages, len(seen))
			}
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		q.Before = p.NextCursor
	}

	t.Run("namespace admin", func(t *testing.T) {
		principal(t, svc, "carol")
		if _, err := svc.Grant(ctx, orchestrator.GrantRequest{User: "carol", Role: "admin", Namespace: "team"}); err != nil {
			t.Fatal(err)
		}
		carol := principal(t, svc, "carol", "berth:read", "berth:admin")
		if p := auditPage(t, svc, carol, orchestrator.AuditQuery{Namespace: "team"}); p.Scope != "all" {
			t.Errorf("carol in her namespace: scope %s", p.Scope)
		}
		if p := auditPage(t, svc, carol, orchestrator.AuditQuery{User: "alice", Namespace: "team"}); len(p.Entries) != 0 {
			t.Errorf("alice's entries in team: %+v, want none (hers are in default)", p.Entries)
		}
		if p := auditPage(t, svc, carol, orchestrator.AuditQuery{}); p.Scope != "own" {
			t.Errorf("carol without a namespace: scope %s, want own", p.Scope)
		}
		_, err := svc.AuditLog(ctx, carol, orchestrator.AuditQuery{User: "alice", Namespace: "default"})
		wantCode(t, err, wire.CodeForbidden)
		// A global admin's token without berth:admin reads its own only.
		rootRead := principal(t, svc, "root", "berth:read")
		if p := auditPage(t, svc, rootRead, orchestrator.AuditQuery{}); p.Scope != "own" {
			t.Errorf("root with berth:read: scope %s, want own", p.Scope)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct {
			q    orchestrator.AuditQuery
			word string
		}{
			{orchestrator.AuditQuery{Limit: 1001}, "limit"},
			{orchestrator.AuditQuery{Limit: -1}, "limit"},
			{orchestrator.AuditQuery{Before: "abc"}, "before"},
			{orchestrator.AuditQuery{Before: "-4"}, "before"},
			{orchestrator.AuditQuery{Since: time.Now(), Until: time.Now().Add(-time.Hour)}, "since"},
			{orchestrator.AuditQuery{Action: string(make([]byte, 300))}, "action"},
		} {
			_, err := svc.AuditLog(ctx, root, c.q)
			wantCode(t, err, wire.CodeBadRequest, c.word)
		}
	})
}
