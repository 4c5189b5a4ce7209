package store_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestGrantIsIdempotent(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice") // first user: admin binding
	b := store.Binding{SubjectKind: store.SubjectUser, Subject: u.ID, Role: "viewer", Namespace: "team-a"}
	g1, err := s.Grant(ctx, b, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g1.ID == "" || g1.CreatedBy != u.ID || g1.Role != "viewer" || g1.Namespace != "team-a" {
		t.Fatalf("granted %+v", g1)
	}
	g2, err := s.Grant(ctx, b, "someone else")
	if err != nil || g2.ID != g1.ID || g2.CreatedBy != u.ID {
		t.Fatalf("second grant: %+v, %v; want the existing binding", g2, err)
	}
}

func TestGrantConcurrently(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	b := store.Binding{SubjectKind: store.SubjectGroup, Subject: "dev", Role: "member", Namespace: "ns"}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			g, err := s.Grant(t.Context(), b, "test")
			if err != nil {
				t.Error(err)
			}
			ids[i] = g.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("concurrent grants returned ids %v, want one id", ids)
		}
	}
}

func TestBindingsForUserAndGroups(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	alice := mustUser(t, s, "alice")              // admin in every namespace
	bob := mustUser(t, s, "bob", "dev", "ops")    // member in default
	carol := mustUser(t, s, "carol", "marketing") // member in default
	grants := []store.Binding{
		{SubjectKind: store.SubjectGroup, Subject: "dev", Role: "member", Namespace: "team-a"},
		{SubjectKind: store.SubjectGroup, Subject: "ops", Role: "viewer"},
		{SubjectKind: store.SubjectGroup, Subject: "marketing", Role: "viewer", Namespace: "team-b"},
		{SubjectKind: store.SubjectUser, Subject: carol.ID, Role: "admin", Namespace: "team-b"},
		// A group named like a user id must not match the user.
		{SubjectKind: store.SubjectGroup, Subject: bob.ID, Role: "admin"},
	}
	for _, g := range grants {
		if _, err := s.Grant(ctx, g, alice.ID); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.BindingsFor(ctx, bob.ID, bob.Groups)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"user/" + bob.ID + "/member@default": true,
		"group/dev/member@team-a":            true,
		"group/ops/viewer@":                  true,
	}
	if len(got) != len(want) {
		t.Fatalf("bindings for bob: %+v, want %v", got, want)
	}
	for _, b := range got {
		if !want[b.SubjectKind+"/"+b.Subject+"/"+b.Role+"@"+b.Namespace] {
			t.Errorf("unexpected binding for bob: %+v", b)
		}
	}
	got, err = s.BindingsFor(ctx, bob.ID, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("bob without groups: %+v, %v", got, err)
	}
	all, err := s.ListBindings(ctx)
	if err != nil || len(all) != 3+len(grants) {
		t.Fatalf("ListBindings: %d bindings, err %v; want %d", len(all), err, 3+len(grants))
	}
}

func TestRevokeBinding(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	b := store.Binding{SubjectKind: store.SubjectGroup, Subject: "dev", Role: "member", Namespace: "ns"}
	if _, err := s.Grant(ctx, b, "test"); err != nil {
		t.Fatal(err)
	}
	other := b
	other.Namespace = ""
	err := s.Revoke(ctx, other)
	wantCode(t, err, wire.CodeNotFound, "member", "dev")
	if err := s.Revoke(ctx, b); err != nil {
		t.Fatal(err)
	}
	err = s.Revoke(ctx, b)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second revoke: %v, want ErrNotFound", err)
	}
}

func TestGrantErrors(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	_, err := s.Grant(ctx, store.Binding{SubjectKind: store.SubjectGroup, Subject: "dev", Role: "owner"}, "test")
	wantCode(t, err, wire.CodeBadRequest, "role")
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", err)
	}
	_, err = s.Grant(ctx, store.Binding{SubjectKind: "robot", Subject: "r2", Role: "viewer"}, "test")
	wantCode(t, err, wire.CodeBadRequest, "subject_kind")
	_, err = s.Grant(ctx, store.Binding{SubjectKind: store.SubjectGroup, Role: "viewer"}, "test")
	wantCode(t, err, wire.CodeBadRequest, "subject")
	_, err = s.Grant(ctx, store.Binding{SubjectKind: store.SubjectUser, Subject: "00000000-0000-0000-0000-000000000000", Role: "viewer"}, "test")
	wantCode(t, err, wire.CodeNotFound, "user")
	_, err = s.Grant(ctx, store.Binding{SubjectKind: store.SubjectUser, Subject: "alice", Role: "viewer"}, "test")
	wantCode(t, err, wire.CodeNotFound, "alice")
}
