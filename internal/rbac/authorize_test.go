package rbac_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

const (
	me      = "u-me"
	someone = "u-other"
	teamA   = "team-a"
	teamB   = "team-b"
)

// The role set-ups of the matrix, in the column order of expectations.
var roleSetups = []struct {
	name     string
	bindings []rbac.Binding
}{
	{"admin-global", []rbac.Binding{{Role: rbac.RoleAdmin}}},
	{"admin-other-ns", []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: teamB}}},
	{"admin-same-ns", []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: teamA}}},
	{"member", []rbac.Binding{{Role: rbac.RoleMember, Namespace: teamA}}},
	{"viewer", []rbac.Binding{{Role: rbac.RoleViewer, Namespace: teamA}}},
	{"no-binding", nil},
}

// Ownership of the resource, in the character order of each cell.
var ownerships = []struct {
	name  string
	owner string
}{
	{"own", me},
	{"others", someone},
	{"new", ""},
}

// expectations is the policy written out by hand, for a resource in
// namespace team-a and a token holding every scope. Each row gives the
// scope the action needs and, per role set-up (admin-global,
// admin-other-ns, admin-same-ns, member, viewer, no-binding), three
// outcomes for own / other's / new resource: A allowed, F 403, N 404.
var expectations = []struct {
	action rbac.Action
	scope  rbac.Scope
	cells  [6]string
}{
	{rbac.ActionClientCreate, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionClientRead, rbac.ScopeRead, [6]string{"AAA", "FNF", "AAA", "ANA", "ANA", "FNF"}},
	{rbac.ActionClientUpdate, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionClientDelete, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionServerCreate, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionServerRead, rbac.ScopeRead, [6]string{"AAA", "FNF", "AAA", "ANA", "ANA", "FNF"}},
	{rbac.ActionServerUpdate, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionServerDelete, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionServerExec, rbac.ScopeExec, [6]string{"AAA", "FNF", "AAA", "ANA", "FNF", "FNF"}},
	{rbac.ActionOperationRead, rbac.ScopeRead, [6]string{"AAA", "FNF", "AAA", "ANA", "ANA", "FNF"}},
	{rbac.ActionImageBuild, rbac.ScopeWrite, [6]string{"AAA", "FNF", "AAA", "FNF", "FNF", "FNF"}},
	{rbac.ActionUserAdmin, rbac.ScopeAdmin, [6]string{"AAA", "FNF", "FNF", "FNF", "FNF", "FNF"}},
	{rbac.ActionAuditRead, rbac.ScopeAdmin, [6]string{"AAA", "FNF", "AAA", "FNF", "FNF", "FNF"}},
	// Tokens belong to no namespace: any role anywhere manages one's own,
	// and only a global admin sees other people's.
	{rbac.ActionTokenManage, rbac.ScopeWrite, [6]string{"AAA", "ANA", "ANA", "ANA", "ANA", "FNF"}},
}

// Token scope sets of the matrix. missing is, per needed scope, every
// scope that does not imply it.
var (
	fullScopes     = []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec, rbac.ScopeAdmin}
	readOnlyScopes = []rbac.Scope{rbac.ScopeRead}
	missingScopes  = map[rbac.Scope][]rbac.Scope{
		rbac.ScopeRead:  {},
		rbac.ScopeWrite: {rbac.ScopeRead, rbac.ScopeExec},
		rbac.ScopeExec:  {rbac.ScopeRead, rbac.ScopeWrite},
		rbac.ScopeAdmin: {rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec},
	}
)

func outcome(err error) byte {
	if err == nil {
		return 'A'
	}
	var d *rbac.Denied
	if !errors.As(err, &d) {
		return '?'
	}
	if d.NotFound {
		return 'N'
	}
	return 'F'
}

func TestAuthorizeMatrix(t *testing.T) {
	if len(expectations) != len(rbac.Actions()) {
		t.Fatalf("expectation table has %d actions, package has %d", len(expectations), len(rbac.Actions()))
	}
	cases := 0
	for _, row := range expectations {
		if got := rbac.RequiredScope(row.action); got != row.scope {
			t.Errorf("RequiredScope(%s) = %s, want %s", row.action, got, row.scope)
		}
		scopeSets := []struct {
			name   string
			scopes []rbac.Scope
		}{
			{"full", fullScopes},
			{"read-only", readOnlyScopes},
			{"missing", missingScopes[row.scope]},
		}
		for ri, setup := range roleSetups {
			for oi, own := range ownerships {
				for _, ss := range scopeSets {
					want := row.cells[ri][oi]
					// A token without the needed scope is refused
					// before ownership or roles are looked at.
					if !(ss.name == "full" || (ss.name == "read-only" && row.scope == rbac.ScopeRead)) {
						want = 'F'
					}
					p := rbac.Principal{UserID: me, Username: "me", Scopes: ss.scopes, Bindings: setup.bindings}
					r := rbac.Resource{Kind: "thing", Namespace: teamA, OwnerID: own.owner}
					err := rbac.Authorize(p, row.action, r)
					if got := outcome(err); got != want {
						t.Errorf("%s / %s / %s / %s scopes: got %c, want %c (err: %v)",
							row.action, setup.name, own.name, ss.name, got, want, err)
					}
					if ss.name == "missing" {
						var d *rbac.Denied
						if errors.As(err, &d) && !slices.Equal(d.MissingScopes, []rbac.Scope{row.scope}) {
							t.Errorf("%s missing scope: MissingScopes = %v, want [%s]", row.action, d.MissingScopes, row.scope)
						}
					}
					cases++
				}
			}
		}
	}
	if want := 14 * 6 * 3 * 3; cases != want {
		t.Fatalf("ran %d cases, want %d", cases, want)
	}
}

func TestScopeImplication(t *testing.T) {
	tests := []struct {
		have   []rbac.Scope
		need   rbac.Scope
		expect bool
	}{
		{[]rbac.Scope{rbac.ScopeAdmin}, rbac.ScopeRead, true},
		{[]rbac.Scope{rbac.ScopeAdmin}, rbac.ScopeWrite, true},
		{[]rbac.Scope{rbac.ScopeAdmin}, rbac.ScopeExec, true},
		{[]rbac.Scope{rbac.ScopeWrite}, rbac.ScopeRead, true},
		{[]rbac.Scope{rbac.ScopeExec}, rbac.ScopeRead, true},
		{[]rbac.Scope{rbac.ScopeWrite}, rbac.ScopeExec, false},
		{[]rbac.Scope{rbac.ScopeExec}, rbac.ScopeWrite, false},
		{[]rbac.Scope{rbac.ScopeRead}, rbac.ScopeWrite, false},
		{[]rbac.Scope{rbac.ScopeWrite, rbac.ScopeExec}, rbac.ScopeAdmin, false},
		{nil, rbac.ScopeRead, false},
		{[]rbac.Scope{"berth:bogus"}, rbac.ScopeRead, false},
	}
	for _, tt := range tests {
		if got := rbac.HasScope(tt.have, tt.need); got != tt.expect {
			t.Errorf("HasScope(%v, %s) = %v, want %v", tt.have, tt.need, got, tt.expect)
		}
	}
	// A member with only berth:exec may run commands in and read their
	// own server, but not stop it.
	p := rbac.Principal{UserID: me, Scopes: []rbac.Scope{rbac.ScopeExec},
		Bindings: []rbac.Binding{{Role: rbac.RoleMember, Namespace: teamA}}}
	own := rbac.Resource{Kind: "server", Namespace: teamA, OwnerID: me}
	for a, want := range map[rbac.Action]byte{
		rbac.ActionServerExec: 'A', rbac.ActionServerRead: 'A', rbac.ActionServerDelete: 'F',
	} {
		if got := outcome(rbac.Authorize(p, a, own)); got != want {
			t.Errorf("exec-only token, %s: got %c, want %c", a, got, want)
		}
	}
}

func TestMissingScopes(t *testing.T) {
	have := []rbac.Scope{rbac.ScopeWrite}
	got := rbac.MissingScopes(have, []rbac.Scope{rbac.ScopeRead, rbac.ScopeExec, rbac.ScopeWrite, rbac.ScopeExec})
	if !slices.Equal(got, []rbac.Scope{rbac.ScopeExec}) {
		t.Fatalf("MissingScopes = %v, want [berth:exec]", got)
	}
	if got := rbac.MissingScopes([]rbac.Scope{rbac.ScopeAdmin}, rbac.AllScopes()); len(got) != 0 {
		t.Fatalf("admin misses %v", got)
	}
}

func TestGroupAndGlobalBindings(t *testing.T) {
	// Bindings from a group and a global member binding both count.
	p := rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{
		{Role: rbac.RoleViewer, Namespace: teamA},
		{Role: rbac.RoleMember},
		{Role: rbac.RoleMember, Namespace: teamA},
	}}
	if got := p.RolesIn(teamA); !slices.Equal(got, []rbac.Role{rbac.RoleMember, rbac.RoleViewer}) {
		t.Fatalf("RolesIn(team-a) = %v", got)
	}
	if got := p.RolesIn("elsewhere"); !slices.Equal(got, []rbac.Role{rbac.RoleMember}) {
		t.Fatalf("RolesIn(elsewhere) = %v", got)
	}
	if err := rbac.Authorize(p, rbac.ActionServerCreate, rbac.Resource{Kind: "server", Namespace: "elsewhere"}); err != nil {
		t.Fatalf("global member cannot create elsewhere: %v", err)
	}
	if p.IsAdmin(teamA) {
		t.Fatal("member is admin")
	}
	nsAdmin := rbac.Principal{UserID: me, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: teamA}}}
	if !nsAdmin.IsAdmin(teamA) || nsAdmin.IsAdmin(teamB) || nsAdmin.IsAdmin("") {
		t.Fatal("namespace admin: IsAdmin wrong")
	}
	global := rbac.Principal{UserID: me, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin}}}
	if !global.IsAdmin(teamA) || !global.IsAdmin("") {
		t.Fatal("global admin: IsAdmin wrong")
	}
}

func TestGlobalResources(t *testing.T) {
	// Users, audit across namespaces and tokens have no namespace.
	nsAdmin := rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: teamA}}}
	global := rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin}}}
	tests := []struct {
		p    rbac.Principal
		a    rbac.Action
		r    rbac.Resource
		want byte
	}{
		{nsAdmin, rbac.ActionAuditRead, rbac.Resource{Kind: "audit"}, 'F'},
		{nsAdmin, rbac.ActionAuditRead, rbac.Resource{Kind: "audit", Namespace: teamA}, 'A'},
		{global, rbac.ActionAuditRead, rbac.Resource{Kind: "audit"}, 'A'},
		{nsAdmin, rbac.ActionUserAdmin, rbac.Resource{Kind: "user", OwnerID: someone}, 'N'},
		{global, rbac.ActionUserAdmin, rbac.Resource{Kind: "user", OwnerID: someone}, 'A'},
		{nsAdmin, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: someone}, 'N'},
		{nsAdmin, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: me}, 'A'},
		{global, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: someone}, 'A'},
		{global, rbac.ActionImageBuild, rbac.Resource{Kind: "image"}, 'A'},
		{nsAdmin, rbac.ActionImageBuild, rbac.Resource{Kind: "image"}, 'F'},
	}
	for _, tt := range tests {
		if got := outcome(rbac.Authorize(tt.p, tt.a, tt.r)); got != tt.want {
			t.Errorf("%v %s %+v: got %c, want %c", tt.p.Bindings, tt.a, tt.r, got, tt.want)
		}
	}
}

func TestFailClosed(t *testing.T) {
	full := rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin}}}
	if outcome(rbac.Authorize(full, "server.nuke", rbac.Resource{})) != 'F' {
		t.Error("unknown action allowed")
	}
	if rbac.RequiredScope("server.nuke") != rbac.ScopeAdmin {
		t.Error("unknown action does not need admin scope")
	}
	anon := full
	anon.UserID = ""
	if outcome(rbac.Authorize(anon, rbac.ActionServerRead, rbac.Resource{Namespace: teamA})) != 'F' {
		t.Error("principal without user id allowed")
	}
	unknownRole := rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: "owner", Namespace: teamA}}}
	if outcome(rbac.Authorize(unknownRole, rbac.ActionTokenManage, rbac.Resource{OwnerID: me})) != 'F' {
		t.Error("unknown role allowed")
	}
}

func TestDeniedMessagesAndCodes(t *testing.T) {
	member := []rbac.Binding{{Role: rbac.RoleMember, Namespace: teamA}}
	tests := []struct {
		name     string
		p        rbac.Principal
		a        rbac.Action
		r        rbac.Resource
		code     string
		contains []string
	}{
		{
			name: "missing scope",
			p:    rbac.Principal{UserID: me, Scopes: []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite}, Bindings: member},
			a:    rbac.ActionServerExec, r: rbac.Resource{Kind: "server", Namespace: teamA, OwnerID: someone},
			code: wire.CodeForbidden, contains: []string{`token lacks scope "berth:exec"`, "server.exec"},
		},
		{
			name: "no role",
			p:    rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: member},
			a:    rbac.ActionServerCreate, r: rbac.Resource{Kind: "server", Namespace: teamB},
			code: wire.CodeForbidden, contains: []string{`no role grants server.create in namespace "team-b"`},
		},
		{
			name: "weak role",
			p:    rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: rbac.RoleViewer, Namespace: teamA}}},
			a:    rbac.ActionServerCreate, r: rbac.Resource{Kind: "server", Namespace: teamA},
			code: wire.CodeForbidden, contains: []string{`no role grants server.create in namespace "team-a"`, "you hold viewer", "admin or member"},
		},
		{
			name: "global admin needed",
			p:    rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: []rbac.Binding{{Role: rbac.RoleAdmin, Namespace: teamA}}},
			a:    rbac.ActionUserAdmin, r: rbac.Resource{Kind: "user"},
			code: wire.CodeForbidden, contains: []string{"user.admin", "global admin"},
		},
		{
			name: "someone else's",
			p:    rbac.Principal{UserID: me, Scopes: fullScopes, Bindings: member},
			a:    rbac.ActionServerExec, r: rbac.Resource{Kind: "server", Namespace: teamA, OwnerID: someone},
			code: wire.CodeNotFound, contains: []string{"server not found"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rbac.Authorize(tt.p, tt.a, tt.r)
			if err == nil {
				t.Fatal("allowed")
			}
			wrapped := fmt.Errorf("handle request: %w", err)
			var d *wire.ErrorDetail
			if !errors.As(wrapped, &d) {
				t.Fatalf("error %v does not convert to *wire.ErrorDetail", err)
			}
			if d.Code != tt.code {
				t.Errorf("code = %s, want %s", d.Code, tt.code)
			}
			if got := wire.DetailOf(wrapped); got.Code != tt.code {
				t.Errorf("DetailOf code = %s, want %s", got.Code, tt.code)
			}
			for _, s := range tt.contains {
				if !strings.Contains(d.Message, s) {
					t.Errorf("message %q lacks %q", d.Message, s)
				}
			}
			if tt.code == wire.CodeNotFound && strings.Contains(err.Error(), someone) {
				t.Errorf("not-found message reveals the owner: %q", err)
			}
		})
	}
}

func TestParseScopes(t *testing.T) {
	got, err := rbac.ParseScopes([]string{"berth:exec", "berth:read", "berth:exec"})
	if err != nil || !slices.Equal(got, []rbac.Scope{rbac.ScopeExec, rbac.ScopeRead}) {
		t.Fatalf("ParseScopes = %v, %v", got, err)
	}
	for _, bad := range []string{"berth:root", ""} {
		_, err := rbac.ParseScopes([]string{"berth:read", bad})
		d := wire.DetailOf(err)
		if err == nil || d.Code != wire.CodeBadRequest {
			t.Fatalf("ParseScopes(%q) = %v, want bad_request", bad, err)
		}
		if bad != "" && !strings.Contains(d.Message, `"berth:root"`) {
			t.Errorf("message %q does not name the scope", d.Message)
		}
	}
	if got, err := rbac.ParseScopes(nil); err != nil || len(got) != 0 {
		t.Fatalf("ParseScopes(nil) = %v, %v", got, err)
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range rbac.AllRoles() {
		if got, err := rbac.ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%s) = %v, %v", r, got, err)
		}
	}
	_, err := rbac.ParseRole("owner")
	if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, `"owner"`) {
		t.Fatalf("ParseRole(owner) = %v", err)
	}
}
