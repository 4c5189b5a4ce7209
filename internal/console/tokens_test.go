package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/console"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/websession"
)

// site is a console on a real orchestrator and database, with browsers
// that sign in by getting a session the way the login pages start one.
type site struct {
	env      *orchtest.Env
	url      string
	sessions *websession.Sessions
}

func newSite(t *testing.T) *site {
	t.Helper()
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	s := &site{env: e}
	var err error
	s.sessions, err = websession.New(websession.Options{Store: e.Store})
	if err != nil {
		t.Fatal(err)
	}
	s.url = orchtest.Serve(t, func(u string) http.Handler {
		c, err := console.New(console.Options{Service: e.Svc, Sessions: s.sessions, SignOutPurpose: "sign-out", PublicURL: u})
		if err != nil {
			t.Fatal(err)
		}
		return c.Handler()
	})
	return s
}

// browser signs username in (creating the user) and returns a client
// holding the session cookie.
func (s *site) browser(t *testing.T, username string) *http.Client {
	t.Helper()
	_, p := s.env.Token(t, username)
	rec := httptest.NewRecorder()
	if _, err := s.sessions.Start(context.Background(), rec, p.UserID, p.Username); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(s.url)
	jar.SetCookies(u, rec.Result().Cookies())
	return &http.Client{Jar: jar}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", strings.TrimSuffix(u[:strings.Index(u[8:], "/")+8], "/"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`<form method="post" action="([^"]+)"[^>]*>\s*<input type="hidden" name="csrf" value="([^"]+)"`)

// csrfFor finds the CSRF token of the form posting to action.
func csrfFor(t *testing.T, page, action string) string {
	t.Helper()
	for _, m := range csrfField.FindAllStringSubmatch(page, -1) {
		if html.UnescapeString(m[1]) == action {
			return html.UnescapeString(m[2])
		}
	}
	t.Fatalf("no form posting to %s in the page", action)
	return ""
}

var secretRE = regexp.MustCompile(`<pre id="token-secret" class="secret">([^<]+)</pre>`)

func TestTokensPage(t *testing.T) {
	s := newSite(t)
	s.env.Token(t, "root") // the first user is the admin
	alice := s.browser(t, "alice")

	code, page := get(t, alice, s.url+"/tokens")
	if code != http.StatusOK || !strings.Contains(page, "vscode:mcp/install?") || !strings.Contains(page, s.url+"/mcp") {
		t.Fatalf("tokens page: %d, without the OAuth configurations:\n%s", code, page)
	}
	if strings.Contains(page, `value="berth:admin"`) {
		t.Error("a member is offered berth:admin")
	}

	// Without its CSRF token, a form is refused and nothing is created.
	code, _ = post(t, alice, s.url+"/tokens", url.Values{"name": {"evil"}, "scope": {"berth:read"}})
	if code != http.StatusForbidden {
		t.Errorf("create without CSRF: %d, want 403", code)
	}
	// A token of another form does not pass either.
	code, _ = post(t, alice, s.url+"/tokens", url.Values{"name": {"evil"}, "scope": {"berth:read"}, "csrf": {"console.bogus"}})
	if code != http.StatusForbidden {
		t.Errorf("create with a bogus CSRF: %d, want 403", code)
	}

	// Asking for more than the user may hold is refused in the page.
	code, page2 := post(t, alice, s.url+"/tokens", url.Values{"name": {"x"}, "scope": {"berth:admin"}, "csrf": {csrfFor(t, page, "/tokens")}})
	if code != http.StatusForbidden || !strings.Contains(page2, "berth:admin") || strings.Contains(page2, `id="token-secret"`) {
		t.Errorf("member asking for admin: %d\n%s", code, page2)
	}

	code, made := post(t, alice, s.url+"/tokens", url.Values{
		"name": {"laptop <vscode>"}, "scope": {"berth:read", "berth:exec"}, "expires_in": {"604800"}, "csrf": {csrfFor(t, page, "/tokens")},
	})
	m := secretRE.FindStringSubmatch(made)
	if code != http.StatusOK || m == nil {
		t.Fatalf("create: %d\n%s", code, made)
	}
	secret := m[1]
	p, err := s.env.Svc.Authenticate(context.Background(), secret)
	if err != nil || p.Username != "alice" || len(p.Scopes) != 2 {
		t.Fatalf("the console's token is %+v, %v", p, err)
	}
	for _, want := range []string{`id="cfg-claude-code"`, `id="cfg-cursor"`, `id="cfg-curl"`, "Bearer " + secret, "laptop &lt;vscode&gt;"} {
		if !strings.Contains(made, want) {
			t.Errorf("the new token's page lacks %q", want)
		}
	}
	// Shown once: the list never shows it again.
	_, again := get(t, alice, s.url+"/tokens")
	if strings.Contains(again, secret) {
		t.Error("the tokens page shows the secret again")
	}

	// Another user neither sees nor revokes alice's tokens.
	bob := s.browser(t, "bob")
	_, bobs := get(t, bob, s.url+"/tokens")
	if strings.Contains(bobs, "laptop &lt;vscode&gt;") {
		t.Error("bob's page lists alice's token")
	}
	owner, err := s.env.Svc.BrowserPrincipal(context.Background(), p.UserID)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.env.Svc.ListMyTokens(context.Background(), owner, orchestrator.ListTokensInput{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, tk := range list.Tokens {
		if tk.Name == "laptop <vscode>" {
			id = tk.ID
		}
	}
	action := "/tokens/" + id + "/revoke"
	// bob cannot forge alice's revoke form: its CSRF token is bound to
	// alice's session.
	if code, _ := post(t, bob, s.url+action, url.Values{"csrf": {csrfFor(t, again, action)}}); code != http.StatusForbidden {
		t.Errorf("bob posting alice's revoke form: %d, want 403", code)
	}
	if _, err := s.env.Svc.Authenticate(context.Background(), secret); err != nil {
		t.Fatalf("the token stopped working after bob's refused revoke: %v", err)
	}
	code, done := post(t, alice, s.url+action, url.Values{"csrf": {csrfFor(t, again, action)}})
	if code != http.StatusOK || !strings.Contains(done, "Token revoked") {
		t.Fatalf("revoke: %d\n%s", code, done)
	}
	if _, err := s.env.Svc.Authenticate(context.Background(), secret); err == nil {
		t.Fatal("the revoked token still authenticates")
	}

	// Signed out, the page sends the browser to sign in.
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := anon.Get(s.url + "/tokens")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/oauth/login/start?return_to=%2Ftokens") {
		t.Errorf("signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}
