package rbac

import (
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// Scope is an OAuth scope a token may carry. Scopes limit what a token can
// do on top of what its user's roles allow.
type Scope string

// The scopes berth knows.
const (
	ScopeRead  Scope = "berth:read"  // read clients, servers, operations
	ScopeWrite Scope = "berth:write" // create, update and delete (lifecycle)
	ScopeExec  Scope = "berth:exec"  // bash, sessions, files, forwarding, server MCP
	ScopeAdmin Scope = "berth:admin" // user administration, audit; implies every other scope
)

// AllScopes returns every scope, narrowest first.
func AllScopes() []Scope {
	return []Scope{ScopeRead, ScopeWrite, ScopeExec, ScopeAdmin}
}

// ParseScopes turns scope names into Scopes, dropping duplicates and
// keeping order. An unknown or empty name is a bad_request error naming it.
func ParseScopes(s []string) ([]Scope, error) {
	out := make([]Scope, 0, len(s))
	for _, name := range s {
		sc := Scope(name)
		if !slices.Contains(AllScopes(), sc) {
			if name == "" {
				return nil, wire.Errorf(wire.CodeBadRequest, "empty scope name (known scopes: %s)", knownScopes())
			}
			return nil, wire.Errorf(wire.CodeBadRequest, "unknown scope %q (known scopes: %s)", name, knownScopes())
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

func knownScopes() string {
	return strings.Join(ScopeStrings(AllScopes()), ", ")
}

// ScopeStrings returns the names of scopes, for headers and JSON.
func ScopeStrings(scopes []Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

// Implies reports whether holding s is enough for an action needing need:
// berth:admin implies every scope, and berth:write and berth:exec each
// imply berth:read.
func (s Scope) Implies(need Scope) bool {
	switch {
	case s == need:
		return true
	case s == ScopeAdmin:
		return slices.Contains(AllScopes(), need)
	case need == ScopeRead:
		return s == ScopeWrite || s == ScopeExec
	}
	return false
}

// HasScope reports whether any of have implies need.
func HasScope(have []Scope, need Scope) bool {
	for _, s := range have {
		if s.Implies(need) {
			return true
		}
	}
	return false
}

// MissingScopes returns those of want that have does not cover. Callers
// minting a token from another use it so that a token can never grant
// more than the one that created it.
func MissingScopes(have, want []Scope) []Scope {
	var missing []Scope
	for _, w := range want {
		if !HasScope(have, w) && !slices.Contains(missing, w) {
			missing = append(missing, w)
		}
	}
	return missing
}

// SortScopes orders scopes narrowest first, as AllScopes does, so that
// challenges and documents list them the same way every time.
func SortScopes(scopes []Scope) {
	order := AllScopes()
	slices.SortFunc(scopes, func(a, b Scope) int { return slices.Index(order, a) - slices.Index(order, b) })
}
