package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/egress"
)

// TestNetworkForms: the start form offers the network policy with the
// operator's default chosen; a server's page shows its policy and
// changes it; a policy past the ceiling is refused with the reason.
func TestNetworkForms(t *testing.T) {
	e := newEnv(t, 0, nil)
	alice := e.signIn(t, "alice")
	if _, page := alice.do(t, "GET", e.url+"/servers", nil, nil); !strings.Contains(page, `<select id="network" name="network">`) {
		t.Fatalf("the start form has no network field:\n%.2000s", page)
	}
	id := alice.startServer(t)
	page := "/servers/" + id
	_, body := alice.do(t, "GET", e.url+page, nil, nil)
	if !strings.Contains(body, `id="server-network"><code>public</code>`) {
		t.Fatalf("the server page does not show the default policy:\n%.3000s", body)
	}
	form := url.Values{"csrf": {tokens(body)[page+"/network"]}, "network": {"allowlist"}, "allow": {"pypi.org\r\n*.github.com:443\r\n"}}
	resp, body := alice.do(t, "POST", e.url+page+"/network", form, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page+"?done=network#network" {
		t.Fatalf("network form: %d %q %.300s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	p, err := e.orch.Svc.BrowserPrincipal(context.Background(), alice.userID)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e.orch.Svc.GetServer(context.Background(), p, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Network; n == nil || n.Egress != egress.Allowlist || !slices.Equal(n.Allow, []string{"pypi.org", "*.github.com:443"}) {
		t.Fatalf("network after the form: %+v", n)
	}
	_, body = alice.do(t, "GET", e.url+page, nil, nil)
	if !strings.Contains(body, "<code>allowlist</code> <code>pypi.org</code> <code>*.github.com:443</code>") {
		t.Fatalf("the page does not show the new policy:\n%.3000s", body)
	}
	form["allow"] = []string{"bad name!"}
	form["csrf"] = []string{tokens(body)[page+"/network"]}
	resp, body = alice.do(t, "POST", e.url+page+"/network", form, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "bad name!") {
		t.Fatalf("a bad entry: %d %.500s", resp.StatusCode, body)
	}
}
