package rbac_test

import (
	"fmt"

	"github.com/berth-mcp/berth/internal/rbac"
)

// A member of team-a may run commands in their own servers there; another
// user's server does not exist as far as they can tell, and a read-only
// token is told which scope it lacks.
func ExampleAuthorize() {
	alice := rbac.Principal{
		UserID: "u-alice", Username: "alice",
		Scopes:   []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec},
		Bindings: []rbac.Binding{{Role: rbac.RoleMember, Namespace: "team-a"}},
	}
	own := rbac.Resource{Kind: "server", Namespace: "team-a", OwnerID: "u-alice"}
	bobs := rbac.Resource{Kind: "server", Namespace: "team-a", OwnerID: "u-bob"}

	fmt.Println(rbac.Authorize(alice, rbac.ActionServerExec, own))
	fmt.Println(rbac.Authorize(alice, rbac.ActionServerExec, bobs))

	readOnly := alice
	readOnly.Scopes = []rbac.Scope{rbac.ScopeRead}
	fmt.Println(rbac.Authorize(readOnly, rbac.ActionServerExec, own))
	// Output:
	// <nil>
	// server not found
	// token lacks scope "berth:exec" needed for server.exec
}
