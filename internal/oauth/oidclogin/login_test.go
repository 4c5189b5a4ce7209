package oidclogin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/berth-mcp/berth/internal/wire"
)

const callerState = "caller-state-42"

// result is what the test berth's callback saw from Finish.
type result struct {
	Identity Identity `json:"identity"`
	State    string   `json:"state"`
	Code     string   `json:"code,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// rp is berth's side of the login on a loopback port: /login runs Start,
// /callback runs Finish and reports what it returned.
type rp struct {
	login  *Login
	base   string
	skew   atomic.Int64 // added to the login's clock
	client *http.Client
}

func startRP(t *testing.T, op *testOP, tweak func(*Config)) *rp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	base := "http://" + ln.Addr().String()
	cfg := Config{
		Issuer:       op.Issuer(),
		ClientID:     op.ClientID,
		ClientSecret: op.ClientSecret,
		Scopes:       []string{"openid", "email", "profile", "groups"},
		GroupsClaim:  "groups",
		RedirectURL:  base + "/callback",
		Key:          []byte("0123456789abcdef0123456789abcdef"),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	l, err := New(t.Context(), cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("New: %v", err)
	}
	p := &rp{login: l, base: base}
	l.now = func() time.Time { return time.Now().Add(time.Duration(p.skew.Load())) }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		l.Start(w, r, r.URL.Query().Get("s"))
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		id, state, err := l.Finish(w, r)
		res := result{Identity: id, State: state}
		if err != nil {
			d := wire.DetailOf(err)
			res.Code, res.Message = d.Code, d.Message
		}
		wire.WriteJSON(w, http.StatusOK, res)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	jar, _ := cookiejar.New(nil)
	p.client = &http.Client{Jar: jar, Timeout: 30 * time.Second}
	return p
}

// run is a browser: it opens /login and follows every redirect, through
// the provider and back to /callback.
func (p *rp) run(t *testing.T) result {
	t.Helper()
	return p.get(t, p.base+"/login?s="+url.QueryEscape(callerState))
}

func (p *rp) get(t *testing.T, u string) result {
	t.Helper()
	resp, err := p.client.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", u, resp.StatusCode)
	}
	var res result
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("decode callback result: %v", err)
	}
	return res
}

// callbackURL runs the login up to the provider's redirect back and
// returns that URL without following it.
func (p *rp) callbackURL(t *testing.T) *url.URL {
	t.Helper()
	c := *p.client
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), p.base+"/callback") {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Get(p.base + "/login?s=" + url.QueryEscape(callerState))
	if err != nil {
		t.Fatalf("start login: %v", err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("provider did not redirect back: status %d: %v", resp.StatusCode, err)
	}
	return loc
}

func (p *rp) loginCookies() []string {
	u, _ := url.Parse(p.base + "/callback")
	var names []string
	for _, c := range p.client.Jar.Cookies(u) {
		if strings.HasPrefix(c.Name, cookiePrefix) {
			names = append(names, c.Name)
		}
	}
	return names
}

func wantError(t *testing.T, res result, code string, fragments ...string) {
	t.Helper()
	t.Logf("refused: %s: %s", res.Code, res.Message)
	if res.Code != code {
		t.Fatalf("error code = %q (%s), want %q", res.Code, res.Message, code)
	}
	for _, f := range fragments {
		if !strings.Contains(res.Message, f) {
			t.Errorf("error %q does not mention %q", res.Message, f)
		}
	}
	if res.Identity.Subject != "" {
		t.Errorf("identity returned with an error: %+v", res.Identity)
	}
}

func TestFullCodeFlow(t *testing.T) {
	op := startOP(t, opOptions{})
	op.QueueUser(&mockoidc.MockUser{
		Subject: "u-123", Email: "Jane.Doe@Example.com", EmailVerified: true,
		PreferredUsername: "Jane.Doe", Groups: []string{"engineering", "berth-admins"},
	})
	p := startRP(t, op, func(c *Config) { c.AllowedDomains = []string{"example.com"} })
	res := p.run(t)
	if res.Code != "" {
		t.Fatalf("login failed: %s: %s", res.Code, res.Message)
	}
	want := Identity{Subject: "u-123", Username: "jane.doe", Email: "Jane.Doe@Example.com", Groups: []string{"engineering", "berth-admins"}}
	if got := res.Identity; got.Subject != want.Subject || got.Username != want.Username || got.Email != want.Email || !slices.Equal(got.Groups, want.Groups) {
		t.Fatalf("identity = %+v, want %+v", got, want)
	}
	if res.State != callerState {
		t.Errorf("caller state = %q, want %q", res.State, callerState)
	}
	reqs := op.authorizeRequests()
	if len(reqs) != 1 {
		t.Fatalf("provider saw %d authorization requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		t.Errorf("authorization request lacks S256 PKCE: %v", q)
	}
	if q.Get("nonce") == "" || q.Get("state") == "" || q.Get("state") == callerState {
		t.Errorf("authorization request must carry a nonce and the login's own state: %v", q)
	}
	if q.Get("scope") != "openid email profile groups" {
		t.Errorf("scope = %q", q.Get("scope"))
	}
	if left := p.loginCookies(); len(left) != 0 {
		t.Errorf("login cookie not cleared: %v", left)
	}
}

func TestGroupsClaimAsString(t *testing.T) {
	op := startOP(t, opOptions{})
	op.QueueUser(claimsUser{sub: "s-1", claims: map[string]any{
		"email": "bob@example.com", "email_verified": "false", "name": "Bob B", "roles": "ops",
	}})
	p := startRP(t, op, func(c *Config) { c.GroupsClaim = "roles" })
	res := p.run(t)
	if res.Code != "" {
		t.Fatalf("login failed: %s", res.Message)
	}
	got := res.Identity
	// email_verified "false" drops the email, so the username falls back
	// to the subject.
	if got.Email != "" || got.Username != "s-1" || got.Name != "Bob B" || !slices.Equal(got.Groups, []string{"ops"}) {
		t.Fatalf("identity = %+v", got)
	}
}

func TestBadIDTokens(t *testing.T) {
	cases := []struct {
		name  string
		opts  opOptions
		code  string
		frags []string
	}{
		{"signed with a key not in the JWKS", opOptions{signWith: otherKey(t)}, wire.CodeUnauthorized, []string{"bad ID token signature"}},
		{"payload tampered", opOptions{tamper: true}, wire.CodeUnauthorized, []string{"bad ID token signature"}},
		{"wrong audience", opOptions{rewrite: func(c map[string]any) { c["aud"] = "some-other-client" }}, wire.CodeUnauthorized, []string{"wrong audience", "some-other-client"}},
		{"expired", opOptions{skew: -2 * time.Hour}, wire.CodeUnauthorized, []string{"expired at"}},
		{"nonce mismatch", opOptions{rewrite: func(c map[string]any) { c["nonce"] = "not-the-nonce" }}, wire.CodeUnauthorized, []string{"nonce mismatch"}},
		{"no nonce", opOptions{rewrite: func(c map[string]any) { delete(c, "nonce") }}, wire.CodeUnauthorized, []string{"nonce mismatch"}},
		{"other issuer", opOptions{rewrite: func(c map[string]any) { c["iss"] = "https://evil.example" }}, wire.CodeUnauthorized, []string{`issued by "https://evil.example"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := startOP(t, tc.opts)
			p := startRP(t, op, nil)
			res := p.run(t)
			wantError(t, res, tc.code, tc.frags...)
			if res.State != callerState {
				t.Errorf("caller state = %q, want it back with the error", res.State)
			}
		})
	}
}

func TestStateMismatch(t *testing.T) {
	op := startOP(t, opOptions{})
	p := startRP(t, op, nil)

	t.Run("altered state", func(t *testing.T) {
		u := p.callbackURL(t)
		q := u.Query()
		q.Set("state", q.Get("state")+"x")
		u.RawQuery = q.Encode()
		wantError(t, p.get(t, u.String()), wire.CodeBadRequest, "state mismatch")
	})
	t.Run("another browser", func(t *testing.T) {
		u := p.callbackURL(t)
		jar, _ := cookiejar.New(nil)
		other := &rp{base: p.base, client: &http.Client{Jar: jar}}
		wantError(t, other.get(t, u.String()), wire.CodeBadRequest, "state mismatch")
	})
	t.Run("tampered cookie", func(t *testing.T) {
		u := p.callbackURL(t)
		cb, _ := url.Parse(p.base + "/callback")
		var forged []*http.Cookie
		for _, c := range p.client.Jar.Cookies(cb) {
			if c.Name == cookiePrefix+u.Query().Get("state") {
				v, err := base64.RawURLEncoding.DecodeString(c.Value)
				if err != nil {
					t.Fatalf("login cookie is not base64url: %v", err)
				}
				v[len(v)/2] ^= 1
				forged = append(forged, &http.Cookie{Name: c.Name, Value: base64.RawURLEncoding.EncodeToString(v), Path: "/callback"})
			}
		}
		if len(forged) != 1 {
			t.Fatalf("want one login cookie, got %d", len(forged))
		}
		p.client.Jar.SetCookies(cb, forged)
		wantError(t, p.get(t, u.String()), wire.CodeBadRequest, "state mismatch", "integrity")
	})
	t.Run("replayed callback", func(t *testing.T) {
		u := p.callbackURL(t)
		if res := p.get(t, u.String()); res.Code != "" {
			t.Fatalf("first use failed: %s", res.Message)
		}
		wantError(t, p.get(t, u.String()), wire.CodeBadRequest, "state mismatch")
	})
	t.Run("missing state", func(t *testing.T) {
		wantError(t, p.get(t, p.base+"/callback?code=abc"), wire.CodeBadRequest, "no state parameter")
	})
}

func TestLoginCookieExpires(t *testing.T) {
	op := startOP(t, opOptions{})
	p := startRP(t, op, nil)
	u := p.callbackURL(t)
	p.skew.Store(int64(cookieTTL + time.Minute))
	wantError(t, p.get(t, u.String()), wire.CodeBadRequest, "longer than 10m0s")
}

func TestParallelLogins(t *testing.T) {
	op := startOP(t, opOptions{})
	op.QueueUser(&mockoidc.MockUser{Subject: "first", PreferredUsername: "first"})
	op.QueueUser(&mockoidc.MockUser{Subject: "second", PreferredUsername: "second"})
	p := startRP(t, op, nil)
	// Two tabs start logins before either finishes; both must complete.
	u1, u2 := p.callbackURL(t), p.callbackURL(t)
	r2, r1 := p.get(t, u2.String()), p.get(t, u1.String())
	if r1.Identity.Username != "first" || r2.Identity.Username != "second" {
		t.Fatalf("got %+v and %+v", r1, r2)
	}
}

func TestDomainNotAllowed(t *testing.T) {
	t.Run("other domain", func(t *testing.T) {
		op := startOP(t, opOptions{})
		op.QueueUser(&mockoidc.MockUser{Subject: "x", Email: "mallory@evil.test", EmailVerified: true})
		p := startRP(t, op, func(c *Config) { c.AllowedDomains = []string{"example.com", "@Example.org"} })
		wantError(t, p.run(t), wire.CodeForbidden, `"evil.test" is not allowed`, "example.com, example.org")
	})
	t.Run("unverified email", func(t *testing.T) {
		op := startOP(t, opOptions{})
		op.QueueUser(claimsUser{sub: "y", claims: map[string]any{"email": "eve@example.com", "email_verified": false}})
		p := startRP(t, op, func(c *Config) { c.AllowedDomains = []string{"example.com"} })
		wantError(t, p.run(t), wire.CodeForbidden, "no verified email")
	})
}

func TestProviderError(t *testing.T) {
	op := startOP(t, opOptions{authorizeError: "access_denied", authorizeErrorDesc: "The user said no"})
	p := startRP(t, op, nil)
	res := p.run(t)
	wantError(t, res, wire.CodeForbidden, "error=access_denied", "The user said no")
	if res.State != callerState {
		t.Errorf("caller state = %q, want %q", res.State, callerState)
	}
	if left := p.loginCookies(); len(left) != 0 {
		t.Errorf("login cookie not cleared: %v", left)
	}
}

func TestCodeRefused(t *testing.T) {
	op := startOP(t, opOptions{})
	p := startRP(t, op, nil)
	u := p.callbackURL(t)
	q := u.Query()
	q.Set("code", "forged-code")
	u.RawQuery = q.Encode()
	wantError(t, p.get(t, u.String()), wire.CodeUnauthorized, "refused the authorization code", "invalid_grant")
}

func TestCallerStateTooLong(t *testing.T) {
	op := startOP(t, opOptions{})
	p := startRP(t, op, nil)
	resp, err := p.client.Get(p.base + "/login?s=" + strings.Repeat("a", maxCallerState+1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
}

func TestNewErrors(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/nothing-here"
	ln.Close()
	cases := []struct {
		name string
		cfg  Config
		frag string
	}{
		{"no issuer", Config{ClientID: "c", RedirectURL: "http://x/cb", Key: key}, "issuer is empty"},
		{"no client", Config{Issuer: dead, RedirectURL: "http://x/cb", Key: key}, "client id"},
		{"short key", Config{Issuer: dead, ClientID: "c", RedirectURL: "http://x/cb", Key: key[:8]}, "8 bytes"},
		{"relative redirect", Config{Issuer: dead, ClientID: "c", RedirectURL: "/cb", Key: key}, "redirect URL"},
		{"bad domain", Config{Issuer: dead, ClientID: "c", RedirectURL: "http://x/cb", Key: key, AllowedDomains: []string{"a@b"}}, "not a domain"},
		{"unreachable issuer", Config{Issuer: dead, ClientID: "c", RedirectURL: "http://x/cb", Key: key}, dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := New(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.frag) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.frag)
			}
		})
	}
}

func TestWrongIssuerInDiscovery(t *testing.T) {
	op := startOP(t, opOptions{})
	// The discovery document names op.Issuer(); asking with a trailing
	// slash must fail and say which issuer was asked for.
	asked := op.Issuer() + "/"
	_, err := New(t.Context(), Config{Issuer: asked, ClientID: op.ClientID, RedirectURL: "http://x/cb", Key: []byte("0123456789abcdef0123456789abcdef")})
	if err == nil || !strings.Contains(err.Error(), asked) {
		t.Fatalf("err = %v, want it to name %s", err, asked)
	}
}

func TestLoginCookieAttributes(t *testing.T) {
	op := startOP(t, opOptions{})
	for _, redirect := range []string{"http://127.0.0.1:1/auth/callback", "https://berth.example.com/auth/callback"} {
		l, err := New(t.Context(), Config{Issuer: op.Issuer(), ClientID: op.ClientID, RedirectURL: redirect, Key: []byte("0123456789abcdef0123456789abcdef")})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		l.Start(rec, httptest.NewRequest(http.MethodGet, "/login", nil), "s")
		if rec.Code != http.StatusFound {
			t.Fatalf("status = %d", rec.Code)
		}
		cookies := rec.Result().Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies = %v", cookies)
		}
		c := cookies[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/auth/callback" || c.MaxAge != 600 || c.Secure != strings.HasPrefix(redirect, "https:") {
			t.Errorf("%s: cookie = %+v", redirect, c)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("the redirect may be cached: Cache-Control %q", rec.Header().Get("Cache-Control"))
		}
	}
}
