package external

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

const resource = "https://berth.example.com/mcp"

// dbUsers resolves users the way the orchestrator's Identity does: ensure
// the user, then load its and its groups' role bindings.
type dbUsers struct {
	st    *store.Store
	calls []string // token ids seen
}

func (d *dbUsers) PrincipalFor(ctx context.Context, username, email string, groups, scopes []string, tokenID string) (rbac.Principal, error) {
	d.calls = append(d.calls, tokenID)
	u, _, err := d.st.EnsureUser(ctx, store.NewUser{Username: username, Email: email, Groups: groups}, string(rbac.RoleAdmin), string(rbac.RoleMember), "default")
	if err != nil {
		return rbac.Principal{}, err
	}
	sc, err := rbac.ParseScopes(scopes)
	if err != nil {
		return rbac.Principal{}, err
	}
	bs, err := d.st.BindingsFor(ctx, u.ID, u.Groups)
	if err != nil {
		return rbac.Principal{}, err
	}
	p := rbac.Principal{UserID: u.ID, Username: u.Username, Groups: u.Groups, Scopes: sc, TokenID: tokenID}
	for _, b := range bs {
		p.Bindings = append(p.Bindings, rbac.Binding{Role: rbac.Role(b.Role), Namespace: b.Namespace})
	}
	return p, nil
}

type fixture struct {
	op    *mockoidc.MockOIDC
	auth  *Authenticator
	users *dbUsers
}

func setup(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	op, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatalf("new OP: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if err := op.Start(ln, nil); err != nil {
		t.Fatalf("start OP: %v", err)
	}
	t.Cleanup(func() { _ = op.Shutdown() })
	users := &dbUsers{st: storetest.New(t)}
	cfg := Config{Issuer: op.Issuer(), Audience: resource, GroupsClaim: "groups"}
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := New(t.Context(), cfg, users)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &fixture{op: op, auth: a, users: users}
}

// claims are a valid access token's claims for resource.
func (f *fixture) claims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": f.op.Issuer(), "aud": resource, "sub": "sub-1", "jti": "tok-1",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		"preferred_username": "Alice", "email": "alice@example.com", "email_verified": true,
		"scope": "openid berth:read berth:exec profile other:thing",
	}
}

// sign signs claims as the issuer does, with the key its JWKS publishes.
func (f *fixture) sign(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	s, err := f.op.Keypair.SignJWT(c)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func wantUnauthorized(t *testing.T, err error, frags ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("token accepted, want 401")
	}
	d := wire.DetailOf(err)
	t.Logf("refused: %s", d.Message)
	if d.Code != wire.CodeUnauthorized {
		t.Fatalf("code = %s (%s), want unauthorized", d.Code, d.Message)
	}
	for _, f := range frags {
		if !strings.Contains(d.Message, f) {
			t.Errorf("message %q does not mention %q", d.Message, f)
		}
	}
}

func TestValidToken(t *testing.T) {
	f := setup(t, nil)
	c := f.claims()
	c["aud"] = []string{"https://other.example", "https://Berth.Example.COM:443/mcp/"}
	c["groups"] = []string{"ops", "dev"}
	p, err := f.auth.Authenticate(t.Context(), f.sign(t, c))
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if p.Username != "alice" || p.TokenID != "tok-1" || p.UserID == "" {
		t.Errorf("principal = %+v", p)
	}
	if !slices.Equal(p.Scopes, []rbac.Scope{rbac.ScopeRead, rbac.ScopeExec}) {
		t.Errorf("scopes = %v, want berth:read berth:exec", p.Scopes)
	}
	if !slices.Equal(p.Groups, []string{"dev", "ops"}) && !slices.Equal(p.Groups, []string{"ops", "dev"}) {
		t.Errorf("groups = %v", p.Groups)
	}
	// The first user of a fresh database is a global admin.
	if !p.IsAdmin("") {
		t.Errorf("first user is not admin: %+v", p.Bindings)
	}
	u, err := f.users.st.UserByName(t.Context(), "alice")
	if err != nil || u.Email != "alice@example.com" {
		t.Errorf("stored user = %+v, %v", u, err)
	}
	if f.auth.Issuer() != f.op.Issuer() {
		t.Errorf("Issuer() = %q", f.auth.Issuer())
	}
}

func TestGroupBindingsApply(t *testing.T) {
	f := setup(t, nil)
	// Someone else is first (and admin), so bob's rights come from his
	// group only.
	c := f.claims()
	c["preferred_username"] = "first"
	if _, err := f.auth.Authenticate(t.Context(), f.sign(t, c)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.users.st.Grant(t.Context(), store.Binding{SubjectKind: store.SubjectGroup, Subject: "team-a", Role: string(rbac.RoleAdmin), Namespace: "team-a"}, "test"); err != nil {
		t.Fatalf("grant: %v", err)
	}
	c = f.claims()
	c["preferred_username"], c["groups"] = "bob", "team-a"
	p, err := f.auth.Authenticate(t.Context(), f.sign(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsAdmin("team-a") || p.IsAdmin("") {
		t.Errorf("bob's bindings = %+v, want admin of team-a only", p.Bindings)
	}
}

func TestScopeClaims(t *testing.T) {
	f := setup(t, nil)
	cases := []struct {
		name  string
		set   func(jwt.MapClaims)
		wants []rbac.Scope
	}{
		{"scp array", func(c jwt.MapClaims) { delete(c, "scope"); c["scp"] = []string{"berth:write", "User.Read"} }, []rbac.Scope{rbac.ScopeWrite}},
		{"scp string", func(c jwt.MapClaims) { delete(c, "scope"); c["scp"] = "berth:admin berth:read" }, []rbac.Scope{rbac.ScopeAdmin, rbac.ScopeRead}},
		{"both", func(c jwt.MapClaims) { c["scope"] = "berth:read"; c["scp"] = []string{"berth:read", "berth:exec"} }, []rbac.Scope{rbac.ScopeRead, rbac.ScopeExec}},
		{"none of berth's", func(c jwt.MapClaims) { c["scope"] = "openid email" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.claims()
			tc.set(c)
			p, err := f.auth.Authenticate(t.Context(), f.sign(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Scopes, tc.wants) {
				t.Errorf("scopes = %v, want %v", p.Scopes, tc.wants)
			}
		})
	}
}

func TestUsernameClaims(t *testing.T) {
	f := setup(t, nil)
	c := f.claims()
	delete(c, "preferred_username")
	c["email_verified"] = false
	// An unverified email names nobody: the subject is used.
	p, err := f.auth.Authenticate(t.Context(), f.sign(t, c))
	if err != nil || p.Username != "sub-1" {
		t.Fatalf("principal = %+v, %v; want sub-1", p, err)
	}
	delete(c, "sub")
	delete(c, "email")
	wantUnauthorized(t, func() error { _, err := f.auth.Authenticate(t.Context(), f.sign(t, c)); return err }(), "names no user")

	g := setup(t, func(cfg *Config) { cfg.UsernameClaims = []string{"upn"} })
	c = g.claims()
	c["upn"] = "Carol@Corp.Example"
	if p, err := g.auth.Authenticate(t.Context(), g.sign(t, c)); err != nil || p.Username != "carol@corp.example" {
		t.Fatalf("principal = %+v, %v; want carol@corp.example", p, err)
	}
}

func TestRejectedTokens(t *testing.T) {
	f := setup(t, nil)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := f.op.Keypair.KeyID()
	signWith := func(method jwt.SigningMethod, key any, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(method, c)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatalf("sign: %v", err)
		}
		return s
	}
	cases := []struct {
		name  string
		token func() string
		frags []string
	}{
		{"wrong audience", func() string { c := f.claims(); c["aud"] = "https://berth.example.com/other"; return f.sign(t, c) }, []string{"wrong audience", "https://berth.example.com/other"}},
		{"no audience", func() string { c := f.claims(); delete(c, "aud"); return f.sign(t, c) }, []string{"wrong audience", "no audience"}},
		{"expired", func() string {
			c := f.claims()
			c["exp"] = time.Now().Add(-time.Minute).Unix()
			return f.sign(t, c)
		}, []string{"expired at"}},
		{"not yet valid", func() string { c := f.claims(); c["nbf"] = time.Now().Add(time.Hour).Unix(); return f.sign(t, c) }, []string{"not valid before"}},
		{"bad signature", func() string { return signWith(jwt.SigningMethodRS256, other, f.claims()) }, []string{"bad access token signature"}},
		{"tampered", func() string {
			good := strings.Split(f.sign(t, f.claims()), ".")
			evil := strings.Split(signWith(jwt.SigningMethodRS256, other, func() jwt.MapClaims { c := f.claims(); c["scope"] = "berth:admin"; return c }()), ".")
			return good[0] + "." + evil[1] + "." + good[2]
		}, []string{"bad access token signature"}},
		{"HS256 with the public key", func() string {
			return signWith(jwt.SigningMethodHS256, []byte("secret"), f.claims())
		}, []string{"bad access token signature"}},
		{"unknown issuer", func() string { c := f.claims(); c["iss"] = "https://idp.evil.example"; return f.sign(t, c) }, []string{"unknown issuer", "idp.evil.example"}},
		{"not JSON", func() string { return "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln" }, []string{"malformed", "JSON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := f.auth.Authenticate(t.Context(), tc.token())
			wantUnauthorized(t, err, tc.frags...)
			if p.UserID != "" {
				t.Errorf("principal returned with an error: %+v", p)
			}
		})
	}
	if len(f.users.calls) != 0 {
		t.Errorf("users resolved for rejected tokens: %v", f.users.calls)
	}
}

func TestNotAJWT(t *testing.T) {
	f := setup(t, nil)
	token, _, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, cred := range []string{token, "", "abc", "a.b", "a.b.c.d", "a..c", ".b.c", "a.b.", "a.b$.c", "a b.c.d", "a+b.c.d", "a.b.c="} {
		if _, err := f.auth.Authenticate(t.Context(), cred); !errors.Is(err, auth.ErrNoMatch) {
			t.Errorf("Authenticate(%q) = %v, want ErrNoMatch", cred, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	users := &dbUsers{}
	cases := []struct {
		name  string
		cfg   Config
		users UserResolver
		frag  string
	}{
		{"no issuer", Config{Audience: resource}, users, "issuer is empty"},
		{"no audience", Config{Issuer: dead}, users, "audience"},
		{"no resolver", Config{Issuer: dead, Audience: resource}, nil, "resolver"},
		{"unreachable", Config{Issuer: dead, Audience: resource}, users, dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(t.Context(), tc.cfg, tc.users)
			if err == nil || !strings.Contains(err.Error(), tc.frag) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.frag)
			}
		})
	}
}

func TestNormalizeAudience(t *testing.T) {
	cases := map[string]string{
		"https://Berth.Example.com:443/": "https://berth.example.com",
		"HTTPS://berth.example.com/mcp/": "https://berth.example.com/mcp",
		"http://127.0.0.1:80/mcp":        "http://127.0.0.1/mcp",
		"http://127.0.0.1:8080/mcp":      "http://127.0.0.1:8080/mcp",
		"https://[::1]:443/":             "https://[::1]",
		"https://berth.example.com/MCP":  "https://berth.example.com/MCP",
		" api://berth ":                  "api://berth",
		"berth-api":                      "berth-api",
		"urn:berth":                      "urn:berth",
	}
	for in, want := range cases {
		if got := NormalizeAudience(in); got != want {
			t.Errorf("NormalizeAudience(%q) = %q, want %q", in, got, want)
		}
	}
}
