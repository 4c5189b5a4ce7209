package oauth_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/oauth/oidclogin"
	"github.com/berth-mcp/berth/internal/orchestrator"
)

// oidcUpstream adapts the real OpenID Connect login to oauth.Upstream, as
// berth serve does.
type oidcUpstream struct{ l *oidclogin.Login }

func (u oidcUpstream) Start(w http.ResponseWriter, r *http.Request, state string) {
	u.l.Start(w, r, state)
}

func (u oidcUpstream) Finish(w http.ResponseWriter, r *http.Request) (oauth.UpstreamIdentity, string, error) {
	id, state, err := u.l.Finish(w, r)
	return oauth.UpstreamIdentity{Subject: id.Subject, Username: id.Username, Email: id.Email, Name: id.Name, Groups: id.Groups}, state, err
}

// startProvider runs an in-process OpenID provider on loopback.
func startProvider(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// TestUpstreamLogin: the user signs in at an OpenID provider; berth
// creates the user from the ID token and its groups feed role bindings.
func TestUpstreamLogin(t *testing.T) {
	op := startProvider(t)
	e := newEnv(t, func(o *oauth.Options) {
		cfg := op.Config()
		login, err := oidclogin.New(context.Background(), oidclogin.Config{
			Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, GroupsClaim: "groups",
			Scopes:      []string{"openid", "email", "profile", "groups"},
			RedirectURL: o.PublicURL + "/oauth/login/callback", Key: []byte("0123456789abcdef0123456789abcdef"),
		})
		if err != nil {
			t.Fatal(err)
		}
		o.DevLogin = false
		o.Upstream = oidcUpstream{login}
		o.UpstreamName = "Test IdP"
	})
	if _, err := e.orch.Svc.Grant(context.Background(), orchestrator.GrantRequest{Group: "sandbox-admins", Role: "admin", Namespace: "team"}); err != nil {
		t.Fatal(err)
	}
	op.QueueUser(&mockoidc.MockUser{
		Subject: "u-olga", Email: "olga@corp.example", EmailVerified: true, PreferredUsername: "olga",
		Groups: []string{"sandbox-admins"},
	})
	reg := e.registerPublic(t, "Upstream App")
	b := e.browser(t, "")
	b.follow = append(b.follow, strings.TrimPrefix(op.Issuer(), "http://"))
	b.follow[len(b.follow)-1], _, _ = strings.Cut(b.follow[len(b.follow)-1], "/")
	p := newPKCE(t)
	code := b.code(e.authParams(reg.ClientID, p))
	if !slices.Equal(b.seen, []string{"upstream", "consent"}) {
		t.Fatalf("pages: %v", b.seen)
	}
	if strings.Contains(b.lastLogin, "no password") || !strings.Contains(b.lastLogin, "Sign in with Test IdP") {
		t.Fatalf("login page without the dev login should offer only the provider:\n%s", b.lastLogin)
	}
	tok := mustToken(t, e.exchange(t, reg.ClientID, code, p))
	status, who, _ := e.whoami(t, tok.AccessToken)
	if status != 200 || who.Username != "olga" || !slices.Equal(who.Groups, []string{"sandbox-admins"}) {
		t.Fatalf("whoami: %d %+v", status, who)
	}
	if !slices.ContainsFunc(who.Roles, func(r orchestrator.RoleIn) bool { return r.Role == "admin" && r.Namespace == "team" }) {
		t.Fatalf("group role binding not applied: %+v", who.Roles)
	}
	// The dev login is off.
	resp, err := b.c.PostForm(e.url+"/oauth/login", map[string][]string{"username": {"root"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("dev login with DevLogin off: %d", resp.StatusCode)
	}
}
