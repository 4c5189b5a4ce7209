package catalog

import (
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
)

// Also is an action an operation may perform besides its own: bash
// without a server registers a client and starts a server on its way.
// Declaring it makes the adapters ask for its scope before the call, so
// an OAuth client learns everything a call needs from one challenge and
// steps up once, instead of being refused halfway inside the service.
type Also struct {
	Action rbac.Action
	// When tells whether a call by p with in (a pointer to the
	// operation's input, from Decode) may perform Action; nil means
	// every call may.
	When func(p rbac.Principal, in any) bool
	// Doc says when, for the reference ("without server_id"); empty
	// when When is nil.
	Doc string
}

// Actions lists what a call by p with in may perform: Action, then each
// of Also whose condition holds. A nil in stands for an input not yet
// decoded: only the unconditional actions count then, so that a call
// whose input is refused is refused for its input.
func (o Op) Actions(p rbac.Principal, in any) []rbac.Action {
	out := []rbac.Action{o.Action}
	for _, a := range o.Also {
		if a.When == nil || (in != nil && a.When(p, in)) {
			out = append(out, a.Action)
		}
	}
	return out
}

// Scopes lists the scopes a call by p with in needs (see Actions),
// without duplicates, narrowest first.
func (o Op) Scopes(p rbac.Principal, in any) []rbac.Scope {
	var out []rbac.Scope
	for _, a := range o.Actions(p, in) {
		if sc := rbac.RequiredScope(a); !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	rbac.SortScopes(out)
	return out
}

// MissingScopes lists the scopes a call by p with in needs and p's token
// lacks; a call refused with these must be refused before it runs, with
// an insufficient_scope challenge naming them.
func (o Op) MissingScopes(p rbac.Principal, in any) []rbac.Scope {
	return rbac.MissingScopes(p.Scopes, o.Scopes(p, in))
}

// ScopeDoc says which scopes the operation needs, for the reference:
// "berth:exec", or "berth:exec; berth:write too without server_id".
func (o Op) ScopeDoc() string {
	always := o.Scopes(rbac.Principal{}, nil)
	parts := []string{strings.Join(rbac.ScopeStrings(always), " ")}
	for _, a := range o.Also {
		if a.When == nil {
			continue
		}
		sc := rbac.RequiredScope(a.Action)
		if slices.Contains(always, sc) {
			continue
		}
		part := string(sc) + " too " + a.Doc
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "; ")
}
