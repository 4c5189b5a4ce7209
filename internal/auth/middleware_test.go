package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-mcp/berth/internal/syncbuf"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// mapAuth recognizes berth session tokens and looks them up in a map.
type mapAuth struct {
	tokens  map[string]rbac.Principal
	expired map[string]bool
	calls   atomic.Int64
}

func (m *mapAuth) Authenticate(_ context.Context, cred string) (rbac.Principal, error) {
	m.calls.Add(1)
	if !auth.LooksLikeToken(cred) {
		return rbac.Principal{}, auth.ErrNoMatch
	}
	if m.expired[cred] {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "token expired")
	}
	p, ok := m.tokens[cred]
	if !ok {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "unknown token")
	}
	return p, nil
}

// prefixAuth stands for a second credential kind: it recognizes
// credentials by prefix and answers with a fixed result.
type prefixAuth struct {
	prefix string
	p      rbac.Principal
	err    func(cred string) error
	calls  atomic.Int64
}

func (a *prefixAuth) Authenticate(_ context.Context, cred string) (rbac.Principal, error) {
	a.calls.Add(1)
	if !strings.HasPrefix(cred, a.prefix) {
		return rbac.Principal{}, auth.ErrNoMatch
	}
	if a.err != nil {
		return rbac.Principal{}, a.err(cred)
	}
	return a.p, nil
}

const metadataURL = "https://berth.example/.well-known/oauth-protected-resource/mcp"

type fixture struct {
	srv      *httptest.Server
	logs     *syncbuf.Buffer
	good     string // valid session token of alice
	expired  string
	unknown  string // well-formed, not in the map
	oauthTok string
	oauthBad string // recognized by the OAuth stand-in, which fails
	internal string // recognized by a stand-in whose backend fails
	down     string // recognized by a stand-in whose database is unavailable
	sessions *mapAuth
	oauth    *prefixAuth
	opts     auth.MiddlewareOptions
}

func newToken(t *testing.T) string {
	t.Helper()
	tok, _, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{logs: &syncbuf.Buffer{}}
	f.good, f.expired, f.unknown = newToken(t), newToken(t), newToken(t)
	f.oauthTok = "oat_alice_access_token_1234567890"
	f.oauthBad = "oatbad_secret_value_987654321"
	f.internal = "dbfail_secret_value_13579"
	f.down = "dbdown_secret_value_24680"
	alice := rbac.Principal{UserID: "u-alice", Username: "alice", TokenID: "t-1",
		Scopes: []rbac.Scope{rbac.ScopeRead}}
	f.sessions = &mapAuth{
		tokens:  map[string]rbac.Principal{f.good: alice},
		expired: map[string]bool{f.expired: true},
	}
	f.oauth = &prefixAuth{prefix: "oat_", p: rbac.Principal{UserID: "u-bob", Username: "bob"}}
	bad := &prefixAuth{prefix: "oatbad_", err: func(string) error {
		return wire.Errorf(wire.CodeUnauthorized, `access token "revoked" \ by admin`+"\n"+`see docs`)
	}}
	failing := &prefixAuth{prefix: "dbfail_", err: func(cred string) error {
		// A careless backend that echoes the credential.
		return fmt.Errorf("look up %s: connection refused", cred)
	}}
	down := &prefixAuth{prefix: "dbdown_", err: func(cred string) error {
		return wire.Errorf(wire.CodeUnavailable, "look up %s: database unavailable: failed to connect to `user=berth`", cred)
	}}
	f.opts = auth.MiddlewareOptions{
		Authenticators:      []auth.Authenticator{f.sessions, bad, failing, down, f.oauth},
		Realm:               "berth",
		ResourceMetadataURL: func(*http.Request) string { return metadataURL },
		Scopes:              func(*http.Request) []string { return []string{"berth:read", "berth:exec"} },
		Logger:              slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.PrincipalFrom(r.Context())
		if !ok {
			http.Error(w, "no principal", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(p)
	})
	f.srv = httptest.NewServer(auth.Middleware(f.opts)(handler))
	t.Cleanup(f.srv.Close)
	return f
}

type answer struct {
	status     int
	retryAfter string
	challenge  string
	body       string
	errBody    wire.ErrorDetail
	principal  rbac.Principal
}

func (f *fixture) do(t *testing.T, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+"/mcp", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, challenge: resp.Header.Get("WWW-Authenticate"), body: string(b), retryAfter: resp.Header.Get("Retry-After")}
	if len(resp.Header.Values("WWW-Authenticate")) > 1 {
		t.Fatalf("several challenges: %q", resp.Header.Values("WWW-Authenticate"))
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &a.principal); err != nil {
			t.Fatalf("decode principal %q: %v", b, err)
		}
		return a
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
	var e wire.Error
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("decode error body %q: %v", b, err)
	}
	a.errBody = e.Error
	return a
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

const noCredChallenge = `Bearer realm="berth", scope="berth:read berth:exec", resource_metadata="` + metadataURL + `"`

func invalidTokenChallenge(desc string) string {
	return `Bearer realm="berth", error="invalid_token", error_description="` + desc +
		`", scope="berth:read berth:exec", resource_metadata="` + metadataURL + `"`
}

func TestMiddleware(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name      string
		header    http.Header
		status    int
		challenge string // exact, when set
		code      string
		user      string // on success
		contains  string // in the error message
	}{
		{name: "no credential", header: nil, status: 401, challenge: noCredChallenge, code: wire.CodeUnauthorized, contains: "Bearer"},
		{name: "mcp session id does not bypass", header: hdr("Mcp-Session-Id", "sess-123"),
			status: 401, challenge: noCredChallenge, code: wire.CodeUnauthorized},
		{name: "other auth scheme counts as none", header: hdr("Authorization", "Basic YWxpY2U6c2VjcmV0"),
			status: 401, challenge: noCredChallenge, code: wire.CodeUnauthorized, contains: "use Bearer"},
		{name: "unknown token", header: hdr("Authorization", "Bearer "+f.unknown),
			status: 401, challenge: invalidTokenChallenge("unknown token"), code: wire.CodeUnauthorized, contains: "unknown token"},
		{name: "expired token", header: hdr("Authorization", "Bearer "+f.expired),
			status: 401, challenge: invalidTokenChallenge("token expired"), code: wire.CodeUnauthorized, contains: "token expired"},
		{name: "unrecognized format", header: hdr("Authorization", "Bearer garbage-credential"),
			status: 401, challenge: invalidTokenChallenge("credential not recognized"), code: wire.CodeUnauthorized},
		{name: "mcp session id with bad token", header: hdr("Mcp-Session-Id", "sess-123", "Authorization", "Bearer "+f.unknown),
			status: 401, challenge: invalidTokenChallenge("unknown token"), code: wire.CodeUnauthorized},
		{name: "description is quoted", header: hdr("Authorization", "Bearer "+f.oauthBad), status: 401,
			challenge: invalidTokenChallenge(`access token \"revoked\" \\ by admin?see docs`), code: wire.CodeUnauthorized},
		{name: "bearer", header: hdr("Authorization", "Bearer "+f.good), status: 200, user: "u-alice"},
		{name: "bearer scheme is case-insensitive", header: hdr("Authorization", "bearer "+f.good), status: 200, user: "u-alice"},
		{name: "session token header", header: hdr("Berth-Session-Token", f.good), status: 200, user: "u-alice"},
		{name: "both headers agree", header: hdr("Authorization", "Bearer "+f.good, "Berth-Session-Token", f.good), status: 200, user: "u-alice"},
		{name: "both headers conflict", header: hdr("Authorization", "Bearer "+f.good, "Berth-Session-Token", f.unknown),
			status: 400, code: wire.CodeBadRequest, contains: "different credentials"},
		{name: "basic plus session token", header: hdr("Authorization", "Basic eA==", "Berth-Session-Token", f.good), status: 200, user: "u-alice"},
		{name: "second authenticator", header: hdr("Authorization", "Bearer "+f.oauthTok), status: 200, user: "u-bob"},
		{name: "empty bearer", header: hdr("Authorization", "Bearer "), status: 400, code: wire.CodeBadRequest, contains: "empty Bearer"},
		{name: "empty session header", header: hdr("Berth-Session-Token", ""), status: 400, code: wire.CodeBadRequest},
		{name: "two authorization headers", header: hdr("Authorization", "Bearer "+f.good, "Authorization", "Bearer "+f.good),
			status: 400, code: wire.CodeBadRequest, contains: "more than one Authorization"},
		{name: "two session headers", header: hdr("Berth-Session-Token", f.good, "Berth-Session-Token", f.good),
			status: 400, code: wire.CodeBadRequest},
		{name: "backend failure", header: hdr("Authorization", "Bearer "+f.internal), status: 500, code: wire.CodeInternal,
			contains: "internal error"},
		{name: "database unavailable", header: hdr("Authorization", "Bearer "+f.down), status: 503, code: wire.CodeUnavailable,
			contains: "retry in a few seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(t, tt.header)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d; body %s", a.status, tt.status, a.body)
			}
			if tt.challenge != "" && a.challenge != tt.challenge {
				t.Errorf("WWW-Authenticate:\n got  %s\n want %s", a.challenge, tt.challenge)
			}
			if tt.status == 401 && !strings.HasPrefix(a.challenge, "Bearer ") {
				t.Errorf("401 without Bearer challenge: %q", a.challenge)
			}
			if tt.status == 400 && !strings.Contains(a.challenge, `error="invalid_request"`) {
				t.Errorf("400 challenge %q lacks invalid_request", a.challenge)
			}
			if tt.status >= 500 && a.challenge != "" {
				t.Errorf("%d with challenge %q", tt.status, a.challenge)
			}
			if (tt.status == 503) != (a.retryAfter != "") {
				t.Errorf("status %d with Retry-After %q", tt.status, a.retryAfter)
			}
			if tt.status >= 500 && strings.Contains(a.body, "failed to connect") {
				t.Errorf("%d shows the backend's details: %s", tt.status, a.body)
			}
			if tt.code != "" && a.errBody.Code != tt.code {
				t.Errorf("error code %q, want %q", a.errBody.Code, tt.code)
			}
			if !strings.Contains(a.errBody.Message, tt.contains) {
				t.Errorf("message %q lacks %q", a.errBody.Message, tt.contains)
			}
			if tt.user != "" && a.principal.UserID != tt.user {
				t.Errorf("principal %+v, want user %s", a.principal, tt.user)
			}
			for _, secret := range []string{f.good, f.unknown, f.expired, f.oauthTok, f.oauthBad, f.internal, f.down} {
				if strings.Contains(a.body, secret) || strings.Contains(a.challenge, secret) {
					t.Errorf("answer echoes a credential: %s %s", a.challenge, a.body)
				}
			}
		})
	}

	t.Run("principal fields reach the handler", func(t *testing.T) {
		a := f.do(t, hdr("Authorization", "Bearer "+f.good))
		if a.principal.Username != "alice" || a.principal.TokenID != "t-1" || len(a.principal.Scopes) != 1 {
			t.Fatalf("principal %+v", a.principal)
		}
	})

	t.Run("an error other than no-match ends the attempt", func(t *testing.T) {
		before := f.oauth.calls.Load()
		f.do(t, hdr("Authorization", "Bearer "+f.expired))
		f.do(t, hdr("Authorization", "Bearer "+f.oauthBad))
		if got := f.oauth.calls.Load(); got != before {
			t.Fatalf("later authenticator called %d times after a decisive error", got-before)
		}
	})

	t.Run("credentials never logged", func(t *testing.T) {
		logs := f.logs.String()
		for _, want := range []string{"authentication failed", "authentication error", "authenticated", "[redacted]", "u-alice"} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %q; the capture is not working:\n%s", want, logs)
			}
		}
		for _, secret := range []string{f.good, f.unknown, f.expired, f.oauthTok, f.oauthBad, f.internal,
			f.good[len(auth.TokenPrefix):], "YWxpY2U6c2VjcmV0"} {
			if strings.Contains(logs, secret) {
				t.Errorf("logs contain credential %q", secret)
			}
		}
	})
}

func TestOptionalChallengeParams(t *testing.T) {
	tok := newToken(t)
	opts := auth.MiddlewareOptions{
		Authenticators: []auth.Authenticator{&mapAuth{tokens: map[string]rbac.Principal{tok: {UserID: "u"}}}},
		Realm:          `odd "realm" \ here`,
	}
	srv := httptest.NewServer(auth.Middleware(opts)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })))
	defer srv.Close()
	f := &fixture{srv: srv}
	if a := f.do(t, nil); a.challenge != `Bearer realm="odd \"realm\" \\ here"` {
		t.Errorf("no-credential challenge %q", a.challenge)
	}
	a := f.do(t, hdr("Berth-Session-Token", newToken(t)))
	if want := `Bearer realm="odd \"realm\" \\ here", error="invalid_token", error_description="unknown token"`; a.challenge != want {
		t.Errorf("challenge\n got  %s\n want %s", a.challenge, want)
	}
	// No logger given: nothing panics, the request still succeeds.
	if a := f.do(t, hdr("Berth-Session-Token", tok)); a.status != 200 {
		t.Errorf("status %d", a.status)
	}
}

func TestNoAuthenticators(t *testing.T) {
	srv := httptest.NewServer(auth.Middleware(auth.MiddlewareOptions{})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler reached without authentication")
	})))
	defer srv.Close()
	f := &fixture{srv: srv}
	a := f.do(t, hdr("Authorization", "Bearer "+newToken(t)))
	if a.status != 401 || a.challenge != `Bearer realm="berth", error="invalid_token", error_description="credential not recognized"` {
		t.Fatalf("status %d challenge %q", a.status, a.challenge)
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := auth.PrincipalFrom(context.Background()); ok {
		t.Fatal("principal in an empty context")
	}
	p := rbac.Principal{UserID: "u-1"}
	got, ok := auth.PrincipalFrom(auth.WithPrincipal(context.Background(), p))
	if !ok || got.UserID != "u-1" {
		t.Fatalf("got %+v, %v", got, ok)
	}
}

func TestWriteInsufficientScope(t *testing.T) {
	opts := auth.MiddlewareOptions{ResourceMetadataURL: func(r *http.Request) string {
		return "https://" + r.Host + "/.well-known/oauth-protected-resource"
	}}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "http://berth.example/mcp", nil)
	auth.WriteInsufficientScope(rec, req, opts, []rbac.Scope{rbac.ScopeExec, rbac.ScopeWrite, rbac.ScopeExec}, `token lacks scope "berth:exec"`)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("status %d", rec.Code)
	}
	want := `Bearer realm="berth", error="insufficient_scope", scope="berth:exec berth:write", resource_metadata="https://berth.example/.well-known/oauth-protected-resource"`
	if got := rec.Header().Get("WWW-Authenticate"); got != want {
		t.Fatalf("WWW-Authenticate:\n got  %s\n want %s", got, want)
	}
	var e wire.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Code != wire.CodeForbidden || e.Error.Message != `token lacks scope "berth:exec"` {
		t.Fatalf("body %+v", e)
	}

	rec = httptest.NewRecorder()
	auth.WriteInsufficientScope(rec, req, auth.MiddlewareOptions{}, []rbac.Scope{rbac.ScopeAdmin}, "")
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="berth", error="insufficient_scope", scope="berth:admin"` {
		t.Fatalf("without metadata: %s", got)
	}
	if !strings.Contains(rec.Body.String(), "berth:admin") {
		t.Fatalf("default message does not name the scope: %s", rec.Body.String())
	}

	// A token that steps up must keep what it could do: the challenge
	// names the scopes it holds too, the message only the missing one.
	held := rbac.Principal{UserID: "u-1", Scopes: []rbac.Scope{rbac.ScopeRead, rbac.ScopeExec}}
	rec = httptest.NewRecorder()
	auth.WriteInsufficientScope(rec, req.WithContext(auth.WithPrincipal(req.Context(), held)), auth.MiddlewareOptions{}, []rbac.Scope{rbac.ScopeWrite}, "")
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="berth", error="insufficient_scope", scope="berth:write berth:read berth:exec"` {
		t.Fatalf("with a token holding read and exec: %s", got)
	}
	if msg := rec.Body.String(); !strings.Contains(msg, "lacks scope berth:write\"") {
		t.Fatalf("message names more than the missing scope: %s", msg)
	}
}

func TestWriteDenied(t *testing.T) {
	member := rbac.Principal{UserID: "u-1", Scopes: []rbac.Scope{rbac.ScopeRead},
		Bindings: []rbac.Binding{{Role: rbac.RoleMember, Namespace: "team-a"}}}
	full := member
	full.Scopes = rbac.AllScopes()
	tests := []struct {
		name      string
		err       error
		status    int
		challenge string
	}{
		{"missing scope", rbac.Authorize(member, rbac.ActionServerExec, rbac.Resource{Kind: "server", Namespace: "team-a", OwnerID: "u-1"}),
			403, `Bearer realm="berth", error="insufficient_scope", scope="berth:exec berth:read"`},
		{"hidden", rbac.Authorize(full, rbac.ActionServerExec, rbac.Resource{Kind: "server", Namespace: "team-a", OwnerID: "u-2"}), 404, ""},
		{"no role", rbac.Authorize(full, rbac.ActionServerCreate, rbac.Resource{Kind: "server", Namespace: "team-b"}), 403, ""},
		{"plain error", errors.New("boom"), 500, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			auth.WriteDenied(rec, req.WithContext(auth.WithPrincipal(req.Context(), member)), auth.MiddlewareOptions{}, tt.err)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d (%v)", rec.Code, tt.status, tt.err)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tt.challenge {
				t.Fatalf("challenge %q, want %q", got, tt.challenge)
			}
		})
	}
}
