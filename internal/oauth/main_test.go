package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/store"
)

var agentBin string

func TestMain(m *testing.M) {
	bin, cleanup, err := orchtest.BuildAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// clock is a test clock that can be moved forward.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// env is one berth with the built-in authorization server: REST, /mcp and
// the OAuth endpoints on a loopback port.
type env struct {
	orch  *orchtest.Env
	as    *oauth.Server
	url   string
	clock *clock
	http  *http.Client
}

// newEnv starts a berth. mutate may change the authorization server's
// options before it is built.
func newEnv(t testing.TB, mutate func(*oauth.Options)) *env {
	t.Helper()
	orch := orchtest.New(t, agentBin, orchestrator.Config{})
	// The first user becomes a global admin; keep it out of the way so
	// the users of the tests are ordinary members.
	if _, _, err := orch.Svc.EnsureUser(context.Background(), store.NewUser{Username: "root"}); err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, orch, mutate)
}

// newEnvOn serves another berth front end on the same orchestrator and
// database.
func newEnvOn(t testing.TB, orch *orchtest.Env, mutate func(*oauth.Options)) *env {
	t.Helper()
	// The listener exists before the server starts, so the handler can be
	// built with the URL and set before any request arrives.
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	publicURL := "http://" + srv.Listener.Addr().String()
	e := &env{orch: orch, url: publicURL, clock: &clock{}}
	opts := oauth.Options{
		PublicURL: publicURL, Store: orch.Store, Users: orch.Svc.Identity, DevLogin: true,
		Now: e.clock.now, ResourceDocumentation: "https://berth.example/docs",
	}
	if mutate != nil {
		mutate(&opts)
	}
	as, err := oauth.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.as = as
	authOpts := auth.MiddlewareOptions{
		Authenticators:      []auth.Authenticator{orch.Svc, as},
		Realm:               "berth",
		ResourceMetadataURL: oauth.ResourceMetadataURL(publicURL),
		Scopes:              oauth.ChallengeScopes,
	}
	hosts := hostguard.Options{PublicURL: publicURL}
	mcpH := mcpserver.New(orch.Svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}}).Handler()
	srv.Config.Handler = api.NewServer(orch.Svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpH, OAuth: as.Handler()})
	srv.Start()
	e.http = srv.Client()
	return e
}

// count returns the number of rows of an oauth table.
func (e *env) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := e.orch.Store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// postJSON sends a JSON body and decodes a JSON answer into out (when
// non-nil); it returns the response with its body read.
func (e *env) do(t testing.TB, req *http.Request, out any) (*http.Response, []byte) {
	t.Helper()
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", req.Method, req.URL, body, err)
		}
	}
	return resp, body
}

func (e *env) postJSON(t testing.TB, path string, body string, out any) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return e.do(t, req, out)
}

// oauthErr is an OAuth error answer.
type oauthErr struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// registration is the answer of POST /oauth/register.
type registration struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret"`
	RegistrationAccessToken string   `json:"registration_access_token"`
	RegistrationClientURI   string   `json:"registration_client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ClientName              string   `json:"client_name"`
}

const testRedirect = "http://127.0.0.1:33418/callback"

// registerPublic registers a public client with refresh tokens.
func (e *env) registerPublic(t testing.TB, name string) registration {
	t.Helper()
	var reg registration
	resp, body := e.postJSON(t, "/oauth/register", fmt.Sprintf(`{"client_name":%q,"redirect_uris":[%q],
		"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`, name, testRedirect), &reg)
	if resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	return reg
}

// pkce is a verifier and its S256 challenge.
type pkce struct{ verifier, challenge string }

func newPKCE(t testing.TB) pkce {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	v := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return pkce{verifier: v, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// authParams are a well-formed authorization request's parameters.
func (e *env) authParams(clientID string, p pkce) url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {testRedirect},
		"code_challenge": {p.challenge}, "code_challenge_method": {"S256"},
		"resource": {e.url + "/mcp"}, "scope": {"berth:read berth:write berth:exec"}, "state": {"st-" + p.challenge[:8]},
	}
}

// browser drives the login and consent pages without a browser: it
// follows redirects on berth's host by hand, signs in with the dev login
// and answers the consent page.
type browser struct {
	t      testing.TB
	e      *env
	c      *http.Client
	user   string
	answer string // approve or deny
	// seen records the pages shown, in order: "login", "consent".
	seen []string
	// lastConsent and lastLogin are the last such pages shown.
	lastConsent, lastLogin string
	// follow are further hosts whose redirects are followed (an OpenID
	// provider).
	follow []string
}

func (e *env) browser(t testing.TB, user string) *browser {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: e.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return &browser{t: t, e: e, c: c, user: user, answer: "approve"}
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

func formFields(body string) url.Values {
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

// result is where the authorization ended: the client's redirect URI with
// its parameters, or an error page.
type result struct {
	redirect *url.URL
	status   int
	page     string
}

// authorize runs an authorization request to its end.
func (b *browser) authorize(params url.Values) result {
	b.t.Helper()
	next, _ := http.NewRequest("GET", b.e.url+"/oauth/authorize?"+params.Encode(), nil)
	for range 10 {
		resp, err := b.c.Do(next)
		if err != nil {
			b.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				b.t.Fatalf("redirect without Location: %v", err)
			}
			if loc.Host != strings.TrimPrefix(b.e.url, "http://") && !slices.Contains(b.follow, loc.Host) {
				return result{redirect: loc, status: resp.StatusCode}
			}
			next, _ = http.NewRequest("GET", loc.String(), nil)
		case resp.StatusCode == 200 && strings.Contains(string(body), `action="/oauth/login/upstream"`) && b.user == "":
			b.seen = append(b.seen, "upstream")
			b.lastLogin = string(body)
			next, _ = http.NewRequest("GET", b.e.url+"/oauth/login/upstream?"+formFields(string(body)).Encode(), nil)
		case resp.StatusCode == 200 && strings.Contains(string(body), `action="/oauth/login"`):
			b.seen = append(b.seen, "login")
			b.lastLogin = string(body)
			f := formFields(string(body))
			f.Set("username", b.user)
			next, _ = http.NewRequest("POST", b.e.url+"/oauth/login", strings.NewReader(f.Encode()))
			next.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		case resp.StatusCode == 200 && strings.Contains(string(body), `action="/oauth/authorize"`):
			b.seen = append(b.seen, "consent")
			b.lastConsent = string(body)
			f := formFields(string(body))
			f.Set("decision", b.answer)
			next, _ = http.NewRequest("POST", b.e.url+"/oauth/authorize", strings.NewReader(f.Encode()))
			next.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		default:
			return result{status: resp.StatusCode, page: html.UnescapeString(string(body))}
		}
	}
	b.t.Fatal("too many steps in the authorization")
	return result{}
}

// code runs an authorization that must succeed and returns its code.
func (b *browser) code(params url.Values) string {
	b.t.Helper()
	res := b.authorize(params)
	if res.redirect == nil {
		b.t.Fatalf("authorization ended on a page: %d %s", res.status, res.page)
	}
	q := res.redirect.Query()
	if q.Get("error") != "" {
		b.t.Fatalf("authorization error: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != params.Get("state") || q.Get("iss") != b.e.as.Issuer() {
		b.t.Fatalf("redirect %s: want state %q and iss %q", res.redirect, params.Get("state"), b.e.as.Issuer())
	}
	return q.Get("code")
}

// tokenResp is the token endpoint's answer, success or error.
type tokenResp struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	oauthErr
	status int
}

// token posts form to the token endpoint.
func (e *env) token(t testing.TB, form url.Values, basic ...string) tokenResp {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if len(basic) == 2 {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	var tr tokenResp
	resp, body := e.do(t, req, &tr)
	tr.status = resp.StatusCode
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token answer %s has Cache-Control %q, want no-store", body, resp.Header.Get("Cache-Control"))
	}
	return tr
}

func (e *env) exchange(t testing.TB, clientID, code string, p pkce) tokenResp {
	t.Helper()
	return e.token(t, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"redirect_uri": {testRedirect}, "code_verifier": {p.verifier}, "resource": {e.url + "/mcp"}})
}

func (e *env) refresh(t testing.TB, clientID, rt string) tokenResp {
	t.Helper()
	return e.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}})
}

func mustToken(t testing.TB, tr tokenResp) tokenResp {
	t.Helper()
	if tr.status != 200 || tr.AccessToken == "" {
		t.Fatalf("token request failed: %d %s: %s", tr.status, tr.Error, tr.Description)
	}
	return tr
}

func wantOAuthError(t testing.TB, tr tokenResp, status int, code string) {
	t.Helper()
	if tr.status != status || tr.Error != code || tr.AccessToken != "" {
		t.Fatalf("want %d %s, got %d %q (%s) access_token=%v", status, code, tr.status, tr.Error, tr.Description, tr.AccessToken != "")
	}
	if tr.Description == "" {
		t.Errorf("%s answer has no error_description", code)
	}
}

// whoami calls /api/whoami with a bearer token.
func (e *env) whoami(t testing.TB, token string) (int, orchestrator.Whoami, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/api/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	var w orchestrator.Whoami
	resp, body := e.do(t, req, nil)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, &w); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, w, resp.Header
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// listTools connects to /mcp with token and lists the tools.
func (e *env) listTools(t testing.TB, token string) ([]*mcp.Tool, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		return nil, err
	}
	return res.Tools, nil
}
