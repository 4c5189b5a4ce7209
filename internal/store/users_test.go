package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestEnsureUserFirstIsAdmin(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	first, created, err := s.EnsureUser(ctx, store.NewUser{Username: " Alice@Example.com ", Email: "alice@example.com", Groups: []string{"dev", "", "dev", "ops"}}, "admin", "member", "default")
	if err != nil || !created {
		t.Fatalf("first user: created %v, err %v", created, err)
	}
	if first.Username != "alice@example.com" || first.Email != "alice@example.com" || !slices.Equal(first.Groups, []string{"dev", "ops"}) {
		t.Fatalf("first user stored as %+v", first)
	}
	second, created, err := s.EnsureUser(ctx, store.NewUser{Username: "bob"}, "admin", "member", "default")
	if err != nil || !created {
		t.Fatalf("second user: created %v, err %v", created, err)
	}
	bs, err := s.ListBindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{first.ID: "admin@", second.ID: "member@default"}
	if len(bs) != 2 {
		t.Fatalf("bindings %+v, want one per user", bs)
	}
	for _, b := range bs {
		if b.SubjectKind != store.SubjectUser || want[b.Subject] != b.Role+"@"+b.Namespace {
			t.Errorf("unexpected binding %+v", b)
		}
	}

	// Existing users: no new binding, fields refreshed only when given.
	again, created, err := s.EnsureUser(ctx, store.NewUser{Username: "ALICE@example.com", DisplayName: "Alice"}, "admin", "member", "default")
	if err != nil || created {
		t.Fatalf("existing user: created %v, err %v", created, err)
	}
	if again.ID != first.ID || again.DisplayName != "Alice" || again.Email != "alice@example.com" || !slices.Equal(again.Groups, []string{"dev", "ops"}) {
		t.Fatalf("refreshed user %+v", again)
	}
	again, _, err = s.EnsureUser(ctx, store.NewUser{Username: "alice@example.com", Groups: []string{"qa"}}, "admin", "member", "default")
	if err != nil || !slices.Equal(again.Groups, []string{"qa"}) || again.DisplayName != "Alice" {
		t.Fatalf("groups refresh: %+v, %v", again, err)
	}
	if n := count(t, s, `SELECT count(*) FROM role_bindings`); n != 2 {
		t.Fatalf("%d bindings after re-ensuring, want 2", n)
	}

	byID, err := s.UserByID(ctx, first.ID)
	if err != nil || byID.Username != first.Username {
		t.Fatalf("UserByID: %+v, %v", byID, err)
	}
	byName, err := s.UserByName(ctx, "Bob")
	if err != nil || byName.ID != second.ID {
		t.Fatalf("UserByName: %+v, %v", byName, err)
	}
	users, err := s.ListUsers(ctx)
	if err != nil || len(users) != 2 || users[0].Username != "alice@example.com" || users[1].Username != "bob" {
		t.Fatalf("ListUsers: %+v, %v", users, err)
	}
}

func TestEnsureUserEmptyRoleBindsNothing(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	if _, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: "a"}, "admin", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: "b"}, "admin", "", ""); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM role_bindings`); n != 1 {
		t.Fatalf("%d bindings, want only the first user's", n)
	}
}

func TestEnsureUserRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	for _, name := range []string{"", "has space", "semi;colon", strings.Repeat("a", 65), "caf\u00e9"} {
		_, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: name}, "admin", "member", "")
		wantCode(t, err, wire.CodeBadRequest, "username")
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%q: error %v is not ErrInvalid", name, err)
		}
	}
	_, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: "nul\x00byte"}, "admin", "member", "")
	wantCode(t, err, wire.CodeBadRequest, "UTF-8")
	// A bad role rolls the creation back: the user does not exist.
	_, _, err = s.EnsureUser(t.Context(), store.NewUser{Username: "carol"}, "owner", "member", "")
	wantCode(t, err, wire.CodeBadRequest, "role")
	if _, err := s.UserByName(t.Context(), "carol"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("user created despite the failed binding: %v", err)
	}
}

// Ten users created at once on a fresh database: exactly one becomes the
// first (admin) user.
func TestEnsureUserFirstAdminUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			_, created, err := s.EnsureUser(t.Context(), store.NewUser{Username: fmt.Sprintf("user%d", i)}, "admin", "member", "default")
			if err == nil && !created {
				err = fmt.Errorf("user%d not created", i)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM role_bindings WHERE role = 'admin'`); n != 1 {
		t.Fatalf("%d admin bindings, want exactly 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM role_bindings WHERE role = 'member' AND namespace = 'default'`); n != 9 {
		t.Fatalf("%d member bindings, want 9", n)
	}
}

// The same new user arriving on several requests at once is created once.
func TestEnsureUserSameNameConcurrently(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]int{}
	createdCount := 0
	for range 8 {
		wg.Go(func() {
			u, created, err := s.EnsureUser(t.Context(), store.NewUser{Username: "dave"}, "admin", "member", "")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[u.ID]++
			if created {
				createdCount++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || createdCount != 1 {
		t.Fatalf("ids %v, created %d times; want one user created once", ids, createdCount)
	}
}

func TestUserLookupsNotFound(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	for _, id := range []string{"not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		_, err := s.UserByID(t.Context(), id)
		wantCode(t, err, wire.CodeNotFound, "user")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UserByID(%q): %v is not ErrNotFound", id, err)
		}
	}
	_, err := s.UserByName(t.Context(), "nobody")
	wantCode(t, err, wire.CodeNotFound, "nobody")
	_, err = s.SetUserDisabled(t.Context(), "00000000-0000-0000-0000-000000000000", true)
	wantCode(t, err, wire.CodeNotFound)
}

func TestSetUserDisabled(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	u := mustUser(t, s, "erin")
	d, err := s.SetUserDisabled(t.Context(), u.ID, true)
	if err != nil || !d.Disabled {
		t.Fatalf("disable: %+v, %v", d, err)
	}
	got, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: "erin"}, "admin", "member", "")
	if err != nil || !got.Disabled {
		t.Fatalf("EnsureUser of a disabled user: %+v, %v (must report it disabled)", got, err)
	}
	d, err = s.SetUserDisabled(t.Context(), u.ID, false)
	if err != nil || d.Disabled {
		t.Fatalf("enable: %+v, %v", d, err)
	}
}
