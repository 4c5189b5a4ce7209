package rbac

import (
	"slices"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// Role is what a role binding grants in a namespace.
type Role string

// The roles, strongest first.
const (
	RoleAdmin  Role = "admin"  // everything in the namespace, including other users' resources
	RoleMember Role = "member" // create resources and work on their own
	RoleViewer Role = "viewer" // read their own resources
)

// AllRoles returns every role, strongest first.
func AllRoles() []Role { return []Role{RoleAdmin, RoleMember, RoleViewer} }

// ParseRole checks a role name; an unknown one is a bad_request error
// naming it.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(AllRoles(), r) {
		return "", wire.Errorf(wire.CodeBadRequest, "unknown role %q (known roles: admin, member, viewer)", s)
	}
	return r, nil
}

// Binding grants Role in Namespace; an empty Namespace means every
// namespace.
type Binding struct {
	Role      Role
	Namespace string
}

// Principal is an authenticated caller: who they are, what their token
// allows and which roles they hold.
type Principal struct {
	UserID   string
	Username string
	Groups   []string
	// Scopes is what the presented token allows.
	Scopes  []Scope
	TokenID string
	// Expires is when the presented credential stops working; zero when
	// it does not on its own (a browser session, an operator's token
	// without expiry). What it mints expires no later.
	Expires time.Time
	// Bindings are the roles of the user and of their groups, resolved by
	// the caller.
	Bindings []Binding
}

// RolesIn returns the roles p holds in namespace, counting global
// bindings, strongest first and without duplicates. For the empty
// namespace only global bindings count.
func (p Principal) RolesIn(namespace string) []Role {
	var roles []Role
	for _, r := range AllRoles() {
		for _, b := range p.Bindings {
			if b.Role == r && (b.Namespace == "" || b.Namespace == namespace) {
				roles = append(roles, r)
				break
			}
		}
	}
	return roles
}

// IsAdmin reports whether p is an admin of namespace, either through a
// binding there or a global one. IsAdmin("") is true only for global
// admins.
func (p Principal) IsAdmin(namespace string) bool {
	return slices.Contains(p.RolesIn(namespace), RoleAdmin)
}

// hasAnyRole reports whether p holds any role anywhere.
func (p Principal) hasAnyRole() bool {
	for _, b := range p.Bindings {
		if slices.Contains(AllRoles(), b.Role) {
			return true
		}
	}
	return false
}
