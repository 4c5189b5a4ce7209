package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestAdminPages(t *testing.T) {
	s := newEnv(t, 0, nil)
	root := s.signIn(t, "root") // the first user: a global admin
	alice := s.signIn(t, "alice")

	// A member gets the console's 403 page, not JSON, on every admin page.
	for _, path := range []string{"/admin", "/admin/audit"} {
		code, page := get(t, alice, s.url+path)
		if code != http.StatusForbidden || !strings.Contains(page, "Not allowed") || strings.HasPrefix(strings.TrimSpace(page), "{") {
			t.Errorf("member on %s: %d\n%s", path, code, page)
		}
		if strings.Contains(page, `href="/admin"`) {
			t.Errorf("member's navigation on %s links the admin section", path)
		}
	}

	code, page := get(t, root, s.url+"/admin")
	if code != http.StatusOK || !strings.Contains(page, "alice") || !strings.Contains(page, "member (default)") {
		t.Fatalf("admin page: %d\n%s", code, page)
	}
	// Grant alice admin of team-a, through the form.
	code, _ = post(t, root, s.url+"/admin/roles/grant", url.Values{
		"user": {"alice"}, "role": {"admin"}, "namespace": {"team-a"}, "csrf": {csrfFor(t, page, "/admin/roles/grant")},
	})
	if code != http.StatusSeeOther {
		t.Fatalf("grant: %d", code)
	}
	alicePrincipal, _ := s.orch.Token(t, "alice")
	p, err := s.orch.Svc.Authenticate(context.Background(), alicePrincipal)
	if err != nil || !p.IsAdmin("team-a") {
		t.Fatalf("alice after the grant: %v %v", p.Bindings, err)
	}
	// A bad grant is explained in the page.
	code, bad := post(t, root, s.url+"/admin/roles/grant", url.Values{
		"user": {"nobody"}, "role": {"member"}, "csrf": {csrfFor(t, page, "/admin/roles/grant")},
	})
	if code != http.StatusNotFound || !strings.Contains(bad, "nobody") || !strings.Contains(bad, `role="alert"`) {
		t.Errorf("grant to an unknown user: %d\n%s", code, bad)
	}
	// Revoke it again.
	code, _ = post(t, root, s.url+"/admin/roles/revoke", url.Values{
		"user": {"alice"}, "role": {"admin"}, "namespace": {"team-a"}, "csrf": {csrfFor(t, page, "/admin/roles/revoke")},
	})
	if code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", code)
	}
	// A member's forged grant is refused even with the admin's form token.
	if code, _ := post(t, alice, s.url+"/admin/roles/grant", url.Values{
		"user": {"alice"}, "role": {"admin"}, "csrf": {csrfFor(t, page, "/admin/roles/grant")},
	}); code != http.StatusForbidden {
		t.Errorf("member posting a grant: %d, want 403", code)
	}

	// The audit log shows both, searchable by action.
	code, audit := get(t, root, s.url+"/admin/audit?action=role.grant")
	if code != http.StatusOK || !strings.Contains(audit, "role.grant") || strings.Contains(audit, "role.revoke") {
		t.Errorf("audit search: %d\n%s", code, audit)
	}
	code, bad = get(t, root, s.url+"/admin/audit?before=not-a-cursor")
	if code != http.StatusBadRequest || !strings.Contains(bad, `role="alert"`) {
		t.Errorf("audit with a bad cursor: %d", code)
	}
}
