package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// User administration for global admins: who is known, with which roles
// and how much of their quota they use, and role bindings granted and
// revoked on the admin's own authority (audited as them). `berth user`
// does the same on the operator's authority through Identity.

// User is a person or service known to berth, as admins see them.
type User struct {
	ID          string    `json:"id"`
	Username    string    `json:"username"`
	Email       string    `json:"email,omitempty"`
	DisplayName string    `json:"display_name,omitempty"`
	Groups      []string  `json:"groups" jsonschema:"groups from the identity provider"`
	Disabled    bool      `json:"disabled"`
	CreatedAt   time.Time `json:"created_at"`
	Roles       []RoleIn  `json:"roles" jsonschema:"roles bound to the user directly or through a group"`
	LiveServers int       `json:"live_servers" jsonschema:"servers holding resources now (what the server quota counts)"`
}

// Quotas are the limits every user works within.
type Quotas struct {
	MaxServersPerUser int   `json:"max_servers_per_user"`
	MaxDiskPerUser    int64 `json:"max_disk_per_user_bytes" jsonschema:"disk the live servers of a user may take together"`
	MaxExecsPerUser   int   `json:"max_execs_per_user" jsonschema:"concurrent commands"`
	TokenDefaultTTL   int64 `json:"token_default_ttl_seconds"`
	TokenMaxTTL       int64 `json:"token_max_ttl_seconds"`
}

// UserList is list_users' answer.
type UserList struct {
	Users  []User `json:"users"`
	Quotas Quotas `json:"quotas"`
}

// RoleBinding gives a role to a user or a group, in one namespace or
// everywhere.
type RoleBinding struct {
	ID          string    `json:"id"`
	SubjectKind string    `json:"subject_kind" jsonschema:"user or group"`
	Subject     string    `json:"subject" jsonschema:"the username or group name"`
	Role        string    `json:"role" jsonschema:"admin, member or viewer"`
	Namespace   string    `json:"namespace,omitempty" jsonschema:"absent: every namespace"`
	CreatedAt   time.Time `json:"created_at"`
	CreatedBy   string    `json:"created_by"`
}

// RoleBindingList is list_role_bindings' answer.
type RoleBindingList struct {
	Bindings []RoleBinding `json:"bindings"`
}

// RoleBindingInput names a binding to grant or revoke.
type RoleBindingInput struct {
	User      string `json:"user,omitempty" jsonschema:"a username (or give group)"`
	Group     string `json:"group,omitempty" jsonschema:"a group name from the identity provider (or give user)"`
	Role      string `json:"role" jsonschema:"admin, member or viewer"`
	Namespace string `json:"namespace,omitempty" jsonschema:"where the role applies; absent: every namespace"`
}

func (s *Service) quotas() Quotas {
	return Quotas{
		MaxServersPerUser: s.cfg.MaxServersPerUser, MaxDiskPerUser: s.cfg.MaxDiskPerUser, MaxExecsPerUser: s.cfg.MaxExecsPerUser,
		TokenDefaultTTL: int64(s.cfg.TokenDefaultTTL / time.Second), TokenMaxTTL: int64(s.cfg.TokenMaxTTL / time.Second),
	}
}

func (s *Service) adminOnly(ctx context.Context, p rbac.Principal, kind string) error {
	return s.authorize(ctx, p, rbac.ActionUserAdmin, rbac.Resource{Kind: kind}, "")
}

// RequireAdmin tells whether p may use the admin pages: user
// administration's rule, for adapters that gate a whole section.
func (s *Service) RequireAdmin(ctx context.Context, p rbac.Principal) error {
	return rbac.Authorize(p, rbac.ActionUserAdmin, rbac.Resource{Kind: "user"})
}

// ListUsers lists every user with their roles and live servers.
func (s *Service) ListUsers(ctx context.Context, p rbac.Principal) (UserList, error) {
	if err := s.adminOnly(ctx, p, "user"); err != nil {
		return UserList{}, err
	}
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return UserList{}, err
	}
	bindings, err := s.store.ListBindings(ctx)
	if err != nil {
		return UserList{}, err
	}
	live, err := s.store.LiveServersByOwner(ctx)
	if err != nil {
		return UserList{}, err
	}
	out := UserList{Users: make([]User, len(users)), Quotas: s.quotas()}
	for i, u := range users {
		v := User{
			ID: u.ID, Username: u.Username, Email: u.Email, DisplayName: u.DisplayName, Groups: nonNilStrings(u.Groups),
			Disabled: u.Disabled, CreatedAt: u.CreatedAt, Roles: []RoleIn{}, LiveServers: live[u.ID],
		}
		for _, b := range bindings {
			mine := b.SubjectKind == store.SubjectUser && b.Subject == u.ID
			for _, g := range u.Groups {
				mine = mine || (b.SubjectKind == store.SubjectGroup && b.Subject == g)
			}
			if mine {
				v.Roles = append(v.Roles, RoleIn{Role: b.Role, Namespace: b.Namespace})
			}
		}
		out.Users[i] = v
	}
	return out, nil
}

// ListRoleBindings lists every role binding, users by name.
func (s *Service) ListRoleBindings(ctx context.Context, p rbac.Principal) (RoleBindingList, error) {
	if err := s.adminOnly(ctx, p, "role_binding"); err != nil {
		return RoleBindingList{}, err
	}
	bindings, err := s.store.ListBindings(ctx)
	if err != nil {
		return RoleBindingList{}, err
	}
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return RoleBindingList{}, err
	}
	names := make(map[string]string, len(users))
	for _, u := range users {
		names[u.ID] = u.Username
	}
	out := RoleBindingList{Bindings: make([]RoleBinding, len(bindings))}
	for i, b := range bindings {
		subject := b.Subject
		if b.SubjectKind == store.SubjectUser {
			subject = names[b.Subject]
		}
		out.Bindings[i] = RoleBinding{ID: b.ID, SubjectKind: b.SubjectKind, Subject: subject, Role: b.Role, Namespace: b.Namespace, CreatedAt: b.CreatedAt, CreatedBy: b.CreatedBy}
	}
	return out, nil
}

// GrantRole binds a role on the admin's authority.
func (s *Service) GrantRole(ctx context.Context, p rbac.Principal, in RoleBindingInput) (RoleBinding, error) {
	if err := s.adminOnly(ctx, p, "role_binding"); err != nil {
		return RoleBinding{}, err
	}
	b, err := s.binding(ctx, GrantRequest(in))
	if err != nil {
		return RoleBinding{}, err
	}
	got, err := s.store.Grant(ctx, b, p.Username)
	s.cache.Forget()
	if err != nil {
		return RoleBinding{}, fmt.Errorf("grant %s to %s %s: %w", b.Role, b.SubjectKind, in.User+in.Group, err)
	}
	s.audit(ctx, p, "role.grant", b.SubjectKind, b.Subject, b.Namespace, "ok", map[string]any{"role": b.Role})
	return RoleBinding{ID: got.ID, SubjectKind: got.SubjectKind, Subject: in.User + in.Group, Role: got.Role, Namespace: got.Namespace, CreatedAt: got.CreatedAt, CreatedBy: got.CreatedBy}, nil
}

// RevokeRole removes a role binding on the admin's authority. An admin
// cannot remove their own last global admin binding, so that berth is
// never left without anyone able to administer it from here.
func (s *Service) RevokeRole(ctx context.Context, p rbac.Principal, in RoleBindingInput) (RoleBindingList, error) {
	if err := s.adminOnly(ctx, p, "role_binding"); err != nil {
		return RoleBindingList{}, err
	}
	b, err := s.binding(ctx, GrantRequest(in))
	if err != nil {
		return RoleBindingList{}, err
	}
	if b.SubjectKind == store.SubjectUser && b.Subject == p.UserID && b.Role == string(rbac.RoleAdmin) && b.Namespace == "" {
		return RoleBindingList{}, wire.Errorf(wire.CodeConflict, "you cannot revoke your own global admin role here; another admin (or `berth user revoke` on the server host) can")
	}
	if err := s.store.Revoke(ctx, b); err != nil {
		return RoleBindingList{}, err
	}
	s.cache.Forget()
	s.audit(ctx, p, "role.revoke", b.SubjectKind, b.Subject, b.Namespace, "ok", map[string]any{"role": b.Role})
	return s.ListRoleBindings(ctx, p)
}
