package rbac_test

import (
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/rbac"
)

func TestUsableScopes(t *testing.T) {
	all := rbac.AllScopes()
	cases := []struct {
		name     string
		bindings []rbac.Binding
		want     []rbac.Scope
	}{
		{"no roles", nil, nil},
		{"viewer", []rbac.Binding{{Role: rbac.RoleViewer, Namespace: "team"}},
			// berth:write for the viewer's own tokens.
			[]rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite}},
		{"member", []rbac.Binding{{Role: rbac.RoleMember, Namespace: "team"}},
			[]rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec}},
		{"global member", []rbac.Binding{{Role: rbac.RoleMember}},
			[]rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec}},
		// A namespace admin reads its namespace's audit log.
		{"namespace admin", []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: "team"}}, all},
		{"global admin", []rbac.Binding{{Role: rbac.RoleAdmin}}, all},
		{"member and viewer", []rbac.Binding{{Role: rbac.RoleViewer, Namespace: "a"}, {Role: rbac.RoleMember, Namespace: "b"}},
			[]rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec}},
		{"unknown role", []rbac.Binding{{Role: "owner"}}, nil},
	}
	for _, c := range cases {
		if got := rbac.UsableScopes(c.bindings); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
