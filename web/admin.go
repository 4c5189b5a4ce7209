package web

// Admin page names.
const (
	PageAdmin      = "admin.html"
	PageAdminAudit = "admin_audit.html"
)

// AdminUser is one row of the users table.
type AdminUser struct {
	Username, Email, Created string
	Groups, Roles            []string
	Disabled                 bool
	LiveServers              int
}

// AdminBinding is one role binding, with what its revoke form posts.
type AdminBinding struct {
	Kind, Subject, Role, Namespace, Created, CreatedBy string
	// Self: the admin's own global admin binding, which the page does
	// not offer to revoke.
	Self bool
}

// AdminServer is one server in the all-servers table.
type AdminServer struct {
	ID, Name, Owner, Namespace, Image, Status, Age, LastActivity string
}

// AdminClient is one client in the all-clients table.
type AdminClient struct {
	Name, Owner, Namespace, Status, Age, LastHeartbeat string
}

// Admin is the data of the admin page.
type Admin struct {
	Users    []AdminUser
	Bindings []AdminBinding
	Clients  []AdminClient
	Servers  []AdminServer
	// Quotas, written out.
	MaxServers, MaxExecs int
	TokenDefault         string
	TokenMax             string
	Roles                []string
	Error, Notice        string
}

// AuditRow is one audit entry.
type AuditRow struct {
	At, User, Action, ResourceType, ResourceID, Namespace, Outcome, Detail string
}

// AdminAudit is the data of the audit log page.
type AdminAudit struct {
	// The search form's values.
	User, Action, ResourceType, ResourceID, Namespace string
	Entries                                           []AuditRow
	// Next is the query string of the next (older) page; "" on the last.
	Next  string
	Error string
}
