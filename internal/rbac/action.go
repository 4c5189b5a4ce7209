package rbac

// Action is one kind of operation a caller can ask for.
type Action string

// The actions. Each needs exactly one scope (RequiredScope).
const (
	ActionClientCreate  Action = "client.create"
	ActionClientRead    Action = "client.read"
	ActionClientUpdate  Action = "client.update" // heartbeat, finish
	ActionClientDelete  Action = "client.delete" // stop
	ActionServerCreate  Action = "server.create"
	ActionServerRead    Action = "server.read"
	ActionServerUpdate  Action = "server.update" // finish, restart
	ActionServerDelete  Action = "server.delete"
	ActionServerExec    Action = "server.exec" // bash, sessions, files, forward, server MCP
	ActionOperationRead Action = "operation.read"
	ActionImageBuild    Action = "image.build"
	ActionUserAdmin     Action = "user.admin" // grant/revoke roles, other users' tokens
	ActionAuditRead     Action = "audit.read"
	ActionTokenManage   Action = "token.manage" // the caller's own tokens
)

// rule says what an action needs.
type rule struct {
	scope Scope
	// roles grant the action on resources the principal may see.
	roles []Role
	// globalOnly: only global bindings count, whatever the resource's
	// namespace (user administration spans namespaces).
	globalOnly bool
	// anyNamespace: a role in any namespace is enough, because the
	// resource (a user's own token) belongs to no namespace.
	anyNamespace bool
}

var (
	adminOnly    = []Role{RoleAdmin}
	adminMember  = []Role{RoleAdmin, RoleMember}
	everyoneRole = []Role{RoleAdmin, RoleMember, RoleViewer}
)

// rules is the whole policy. Members work on what they own; viewers only
// read it; building images changes what every namespace member runs, so
// it is left to admins.
var rules = map[Action]rule{
	ActionClientCreate:  {scope: ScopeWrite, roles: adminMember},
	ActionClientRead:    {scope: ScopeRead, roles: everyoneRole},
	ActionClientUpdate:  {scope: ScopeWrite, roles: adminMember},
	ActionClientDelete:  {scope: ScopeWrite, roles: adminMember},
	ActionServerCreate:  {scope: ScopeWrite, roles: adminMember},
	ActionServerRead:    {scope: ScopeRead, roles: everyoneRole},
	ActionServerUpdate:  {scope: ScopeWrite, roles: adminMember},
	ActionServerDelete:  {scope: ScopeWrite, roles: adminMember},
	ActionServerExec:    {scope: ScopeExec, roles: adminMember},
	ActionOperationRead: {scope: ScopeRead, roles: everyoneRole},
	ActionImageBuild:    {scope: ScopeWrite, roles: adminOnly},
	ActionUserAdmin:     {scope: ScopeAdmin, roles: adminOnly, globalOnly: true},
	ActionAuditRead:     {scope: ScopeAdmin, roles: adminOnly},
	ActionTokenManage:   {scope: ScopeWrite, roles: everyoneRole, anyNamespace: true},
}

// Actions returns every action.
func Actions() []Action {
	return []Action{
		ActionClientCreate, ActionClientRead, ActionClientUpdate, ActionClientDelete,
		ActionServerCreate, ActionServerRead, ActionServerUpdate, ActionServerDelete, ActionServerExec,
		ActionOperationRead, ActionImageBuild, ActionUserAdmin, ActionAuditRead, ActionTokenManage,
	}
}

// RequiredScope returns the scope a token needs for a; an unknown action
// needs berth:admin, so that a typo fails closed.
func RequiredScope(a Action) Scope {
	if r, ok := rules[a]; ok {
		return r.scope
	}
	return ScopeAdmin
}
