package rbac

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// Resource is what an action applies to.
type Resource struct {
	// Kind is "client", "server", "operation", "image", "user", "token" or
	// "audit"; it only shapes messages.
	Kind      string
	Namespace string
	// OwnerID is "" when the resource does not exist yet (create), has no
	// owner, or stands for a listing the caller filters by owner itself.
	OwnerID string
}

// Denied is the error Authorize returns when it refuses. It converts to a
// *wire.ErrorDetail through errors.As (not_found or forbidden), so the
// HTTP layer answers with the right status without knowing this type.
type Denied struct {
	// NotFound: the resource belongs to someone else and the principal may
	// not see it. Callers answer 404 exactly as for a missing resource.
	NotFound bool
	// MissingScopes are the scopes the token lacks; callers answer 403
	// with an insufficient_scope challenge listing them.
	MissingScopes []Scope
	// Reason is the message for the caller.
	Reason string
}

// Error returns the reason.
func (d *Denied) Error() string { return d.Reason }

// Code returns the wire error code: not_found or forbidden.
func (d *Denied) Code() string {
	if d.NotFound {
		return wire.CodeNotFound
	}
	return wire.CodeForbidden
}

// As lets errors.As turn a Denied into a *wire.ErrorDetail.
func (d *Denied) As(target any) bool {
	if t, ok := target.(**wire.ErrorDetail); ok {
		*t = &wire.ErrorDetail{Code: d.Code(), Message: d.Reason}
		return true
	}
	return false
}

// Authorize decides whether p may do a on r. It returns nil or a *Denied.
// Checks run in the order scope, ownership, role; see the package comment
// for why.
func Authorize(p Principal, a Action, r Resource) error {
	rl, ok := rules[a]
	if !ok {
		return &Denied{Reason: fmt.Sprintf("unknown action %q", a)}
	}
	if p.UserID == "" {
		// A principal without identity would own every ownerless
		// resource; refuse rather than guess.
		return &Denied{Reason: "request has no authenticated user"}
	}
	if !HasScope(p.Scopes, rl.scope) {
		return &Denied{
			MissingScopes: []Scope{rl.scope},
			Reason:        fmt.Sprintf("token lacks scope %q needed for %s", rl.scope, a),
		}
	}

	// Users and tokens live outside namespaces, so only a global admin may
	// see other people's.
	seeAllIn := r.Namespace
	if rl.globalOnly || rl.anyNamespace {
		seeAllIn = ""
	}
	if r.OwnerID != "" && r.OwnerID != p.UserID && !p.IsAdmin(seeAllIn) {
		kind := r.Kind
		if kind == "" {
			kind = "resource"
		}
		return &Denied{NotFound: true, Reason: kind + " not found"}
	}

	var held []Role
	switch {
	case rl.globalOnly:
		held = p.RolesIn("")
	case rl.anyNamespace:
		for _, b := range p.Bindings {
			if !slices.Contains(held, b.Role) {
				held = append(held, b.Role)
			}
		}
	default:
		held = p.RolesIn(r.Namespace)
	}
	for _, h := range held {
		if slices.Contains(rl.roles, h) {
			return nil
		}
	}
	return &Denied{Reason: roleReason(a, rl, r.Namespace, held)}
}

func roleReason(a Action, rl rule, namespace string, held []Role) string {
	var b strings.Builder
	switch {
	case rl.globalOnly:
		fmt.Fprintf(&b, "no role grants %s: it needs a global admin binding", a)
	case rl.anyNamespace:
		fmt.Fprintf(&b, "no role grants %s: you hold no role in any namespace", a)
	case namespace == "":
		fmt.Fprintf(&b, "no role grants %s globally", a)
	default:
		fmt.Fprintf(&b, "no role grants %s in namespace %q", a, namespace)
	}
	if len(held) > 0 && !rl.anyNamespace {
		names := make([]string, len(held))
		for i, h := range held {
			names[i] = string(h)
		}
		fmt.Fprintf(&b, " (you hold %s; it needs %s)", strings.Join(names, ", "), joinRoles(rl.roles))
	}
	return b.String()
}

func joinRoles(roles []Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return strings.Join(names, " or ")
}
