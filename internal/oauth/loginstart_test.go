package oauth_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLoginStart: the sign-in entry of berth's own pages
// (/oauth/login/start?return_to=) resumes at a path on this site after
// the login and nowhere else, so it is no open redirect; signed in, it
// goes there at once; sign-out with return_to goes back to a local path
// only.
func TestLoginStart(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t, "alice")
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := b.c.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, evil := range []string{"//evil.example", "https://evil.example/", "/\\evil.example", "/\t/evil.example", "javascript:alert(1)", "servers"} {
		resp := get("/oauth/login/start?return_to=" + url.QueryEscape(evil))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("return_to %q: %d (Location %q), want 400", evil, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	resp := get("/oauth/login/start?return_to=" + url.QueryEscape("/servers?x=1"))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/oauth/login?request=") {
		t.Fatalf("start: %d %q, want a redirect to the login page", resp.StatusCode, loc)
	}
	page, err := b.c.Get(e.url + loc)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, page)
	form := formFields(body)
	form.Set("username", "alice")
	resp, err = b.c.PostForm(e.url+"/oauth/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/servers?x=1" {
		t.Fatalf("after the login: %d %q, want 303 to /servers?x=1", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Signed in: straight there.
	if resp := get("/oauth/login/start?return_to=/operations"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/operations" {
		t.Fatalf("signed in: %d %q, want 303 to /operations", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Sign-out: back to a local path only.
	apps, err := b.c.Get(e.url + "/account/apps")
	if err != nil {
		t.Fatal(err)
	}
	csrf := formFields(readAll(t, apps)).Get("csrf")
	out := url.Values{"csrf": {csrf}, "return_to": {"//evil.example"}}
	resp, err = b.c.PostForm(e.url+"/oauth/logout", out)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" {
		t.Fatalf("sign-out to //evil.example: %d %q, want the signed-out page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Signed out now; a second sign-out with a local return_to goes there.
	resp, err = b.c.PostForm(e.url+"/oauth/logout", url.Values{"return_to": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign-out to /: %d %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get("/oauth/login/start?return_to=/operations"); resp.StatusCode != http.StatusFound {
		t.Fatalf("after sign-out, start: %d, want a new login", resp.StatusCode)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
