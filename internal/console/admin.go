package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// The admin pages: users and their roles and quotas, role bindings,
// every server, the audit log. The service refuses anyone but a global
// admin, and the page shows that refusal (403); the navigation only
// hides the link.

func (c *Console) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin", c.signedIn(c.adminPage))
	mux.HandleFunc("POST /admin/roles/grant", c.form(c.grantRole))
	mux.HandleFunc("POST /admin/roles/revoke", c.form(c.revokeRole))
	mux.HandleFunc("GET /admin/audit", c.signedIn(c.auditPage))
}

const stamp = "2006-01-02 15:04 UTC"

func (c *Console) adminData(r *http.Request, v *Visit, d web.Admin) (web.Admin, error) {
	ctx := r.Context()
	users, err := c.svc.ListUsers(ctx, v.Principal)
	if err != nil {
		return d, err
	}
	bindings, err := c.svc.ListRoleBindings(ctx, v.Principal)
	if err != nil {
		return d, err
	}
	servers, err := c.svc.ListServers(ctx, v.Principal, "")
	if err != nil {
		return d, err
	}
	clients, err := c.svc.ListClients(ctx, v.Principal)
	if err != nil {
		return d, err
	}
	q := users.Quotas
	d.MaxServers, d.MaxExecs = q.MaxServersPerUser, q.MaxExecsPerUser
	d.TokenDefault = days(time.Duration(q.TokenDefaultTTL) * time.Second)
	d.TokenMax = days(time.Duration(q.TokenMaxTTL) * time.Second)
	for _, r := range rbac.AllRoles() {
		d.Roles = append(d.Roles, string(r))
	}
	names := map[string]string{}
	for _, u := range users.Users {
		names[u.ID] = u.Username
		row := web.AdminUser{Username: u.Username, Email: u.Email, Created: u.CreatedAt.UTC().Format(stamp), Groups: u.Groups, Disabled: u.Disabled, LiveServers: u.LiveServers}
		for _, ro := range u.Roles {
			where := ro.Namespace
			if where == "" {
				where = "everywhere"
			}
			row.Roles = append(row.Roles, ro.Role+" ("+where+")")
		}
		d.Users = append(d.Users, row)
	}
	for _, b := range bindings.Bindings {
		d.Bindings = append(d.Bindings, web.AdminBinding{
			Kind: b.SubjectKind, Subject: b.Subject, Role: b.Role, Namespace: b.Namespace,
			Created: b.CreatedAt.UTC().Format(stamp), CreatedBy: b.CreatedBy,
			Self: b.SubjectKind == "user" && b.Subject == v.Principal.Username && b.Role == string(rbac.RoleAdmin) && b.Namespace == "",
		})
	}
	now := time.Now()
	for _, cl := range clients {
		d.Clients = append(d.Clients, web.AdminClient{
			Name: cl.Name, Owner: names[cl.OwnerID], Namespace: cl.Namespace, Status: cl.Status,
			Age: web.Ago(now, cl.CreatedAt), LastHeartbeat: web.Ago(now, cl.LastHeartbeatAt),
		})
	}
	for _, s := range servers {
		name := s.ServerName
		if name == "" {
			name = s.ID
		}
		d.Servers = append(d.Servers, web.AdminServer{
			ID: s.ID, Name: name, Owner: names[s.OwnerID], Namespace: s.Namespace, Image: s.ImageTag, Status: s.Status,
			Age: web.Ago(now, s.CreatedAt), LastActivity: web.Ago(now, s.LastActivityAt),
		})
	}
	return d, nil
}

// days writes a lifetime the way people say it.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return dayLabel(int(d / (24 * time.Hour)))
	}
	return d.String()
}

func (c *Console) adminPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	d := web.Admin{}
	switch r.URL.Query().Get("done") {
	case "granted":
		d.Notice = "Role granted. It applies from the user's next request."
	case "revoked":
		d.Notice = "Role revoked."
	}
	d, err := c.adminData(r, v, d)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, web.PageAdmin, "admin", "Admin", d)
}

func bindingInput(r *http.Request) orchestrator.RoleBindingInput {
	f := r.PostForm
	return orchestrator.RoleBindingInput{User: f.Get("user"), Group: f.Get("group"), Role: f.Get("role"), Namespace: f.Get("namespace")}
}

// adminFormResult shows the page again with err in it, or goes back to
// it with a notice.
func (c *Console) adminFormResult(w http.ResponseWriter, r *http.Request, v *Visit, err error, done string) {
	if err == nil {
		http.Redirect(w, r, "/admin?done="+done+"#roles", http.StatusSeeOther)
		return
	}
	d := wire.DetailOf(err)
	status := wire.StatusOf(d.Code)
	if status >= 500 || d.Code == wire.CodeForbidden {
		c.fail(w, r, v, err)
		return
	}
	page, lerr := c.adminData(r, v, web.Admin{Error: d.Message})
	if lerr != nil {
		c.fail(w, r, v, lerr)
		return
	}
	c.render(w, r, v, status, web.PageAdmin, "admin", "Admin", page)
}

func (c *Console) grantRole(w http.ResponseWriter, r *http.Request, v *Visit) {
	_, err := c.svc.GrantRole(r.Context(), v.Principal, bindingInput(r))
	c.adminFormResult(w, r, v, err, "granted")
}

func (c *Console) revokeRole(w http.ResponseWriter, r *http.Request, v *Visit) {
	_, err := c.svc.RevokeRole(r.Context(), v.Principal, bindingInput(r))
	c.adminFormResult(w, r, v, err, "revoked")
}

// auditPageSize is how many entries one page of the audit log shows.
const auditPageSize = 50

// maxDetail bounds what a row shows of an entry's detail.
const maxDetail = 300

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, v *Visit) {
	qs := r.URL.Query()
	d := web.AdminAudit{User: qs.Get("user"), Action: qs.Get("action"), ResourceType: qs.Get("resource_type"), ResourceID: qs.Get("resource_id"), Namespace: qs.Get("namespace")}
	// The admin section is for global admins, though members may read
	// their own entries through the API.
	if err := c.svc.RequireAdmin(r.Context(), v.Principal); err != nil {
		c.fail(w, r, v, err)
		return
	}
	page, err := c.svc.AuditLog(r.Context(), v.Principal, orchestrator.AuditQuery{
		User: d.User, Action: d.Action, ResourceType: d.ResourceType, ResourceID: d.ResourceID, Namespace: d.Namespace,
		Before: qs.Get("before"), Limit: auditPageSize,
	})
	if err != nil {
		dt := wire.DetailOf(err)
		if wire.StatusOf(dt.Code) >= 500 || dt.Code == wire.CodeForbidden {
			c.fail(w, r, v, err)
			return
		}
		d.Error = dt.Message
		c.render(w, r, v, wire.StatusOf(dt.Code), web.PageAdminAudit, "admin", "Audit log", d)
		return
	}
	for _, e := range page.Entries {
		detail := ""
		if len(e.Detail) > 0 {
			b, _ := json.Marshal(e.Detail)
			detail = string(b)
			if len(detail) > maxDetail {
				detail = detail[:maxDetail] + "…"
			}
		}
		d.Entries = append(d.Entries, web.AuditRow{
			At: e.At.UTC().Format("2006-01-02 15:04:05 UTC"), User: e.Username, Action: e.Action,
			ResourceType: e.ResourceType, ResourceID: e.ResourceID, Namespace: e.Namespace, Outcome: e.Outcome, Detail: detail,
		})
	}
	if page.NextCursor != "" {
		next := url.Values{}
		for _, k := range []string{"user", "action", "resource_type", "resource_id", "namespace"} {
			if val := qs.Get(k); val != "" {
				next.Set(k, val)
			}
		}
		next.Set("before", page.NextCursor)
		d.Next = next.Encode()
	}
	c.render(w, r, v, http.StatusOK, web.PageAdminAudit, "admin", "Audit log", d)
}
