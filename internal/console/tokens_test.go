package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// csrfFor is the CSRF token of the page's form posting to action.
func csrfFor(t *testing.T, page, action string) string {
	t.Helper()
	tok, ok := tokens(page)[action]
	if !ok {
		t.Fatalf("no form posting to %s in the page", action)
	}
	return tok
}

// get and post send a request as b and return the status and body.
func get(t *testing.T, b *browser, u string) (int, string) {
	t.Helper()
	resp, body := b.do(t, http.MethodGet, u, nil, nil)
	return resp.StatusCode, body
}

func post(t *testing.T, b *browser, u string, form url.Values) (int, string) {
	t.Helper()
	resp, body := b.do(t, http.MethodPost, u, form, nil)
	return resp.StatusCode, body
}

var secretRE = regexp.MustCompile(`<pre id="token-secret" class="secret" tabindex="0">([^<]+)</pre>`)

func TestTokensPage(t *testing.T) {
	s := newEnv(t, 0, nil)
	alice := s.signIn(t, "alice")

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
	p, err := s.orch.Svc.Authenticate(context.Background(), secret)
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
	bob := s.signIn(t, "bob")
	_, bobs := get(t, bob, s.url+"/tokens")
	if strings.Contains(bobs, "laptop &lt;vscode&gt;") {
		t.Error("bob's page lists alice's token")
	}
	owner, err := s.orch.Svc.BrowserPrincipal(context.Background(), p.UserID)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.orch.Svc.ListMyTokens(context.Background(), owner, orchestrator.ListTokensInput{})
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
	if _, err := s.orch.Svc.Authenticate(context.Background(), secret); err != nil {
		t.Fatalf("the token stopped working after bob's refused revoke: %v", err)
	}
	if code, _ := post(t, alice, s.url+action, url.Values{"csrf": {csrfFor(t, again, action)}}); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", code)
	}
	if _, done := get(t, alice, s.url+"/tokens?revoked=1"); !strings.Contains(done, "Token revoked") {
		t.Error("the tokens page does not confirm the revocation")
	}
	if _, err := s.orch.Svc.Authenticate(context.Background(), secret); err == nil {
		t.Fatal("the revoked token still authenticates")
	}

	// Signed out, the page sends the browser to sign in.
	resp, _ := (*browser)(nil).do(t, http.MethodGet, s.url+"/tokens", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/oauth/login/start?return_to=%2Ftokens") {
		t.Errorf("signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}
