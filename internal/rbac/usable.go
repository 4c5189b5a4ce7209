package rbac

import "slices"

// UsableScopes returns the scopes that a user holding bindings can put
// to use, narrowest first: those needed by some action that one of the
// user's roles is granted somewhere. An authorization server grants no
// more than these, so that a token never claims a power (berth:admin for
// a member) its user cannot exercise, and the user is told so.
func UsableScopes(bindings []Binding) []Scope {
	var out []Scope
	for _, sc := range AllScopes() {
		for _, rl := range rules {
			if rl.scope == sc && rl.heldBy(bindings) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// heldBy reports whether any of bindings grants the rule somewhere: a
// global binding for a globalOnly rule, a binding in any namespace
// otherwise.
func (rl rule) heldBy(bindings []Binding) bool {
	for _, b := range bindings {
		if rl.globalOnly && b.Namespace != "" {
			continue
		}
		if slices.Contains(rl.roles, b.Role) {
			return true
		}
	}
	return false
}

// AdvertisedScopes are the scopes metadata documents list
// (scopes_supported): those a member can use. berth:admin is granted to
// an admin who asks for it, but not offered, because clients that ask
// for every listed scope (the MCP Inspector does) would then fail against
// an authorization server that will not grant it to them.
func AdvertisedScopes() []Scope {
	return UsableScopes([]Binding{{Role: RoleMember}})
}
