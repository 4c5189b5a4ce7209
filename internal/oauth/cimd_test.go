package oauth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/oauth"
)

// docServer serves client ID metadata documents over TLS on loopback.
type docServer struct {
	srv                  *httptest.Server
	fetches, notModified atomic.Int64
	tls                  *tls.Config
}

func newDocServer(t *testing.T) *docServer {
	d := &docServer{}
	mux := http.NewServeMux()
	doc := func(id string, extra map[string]any) map[string]any {
		m := map[string]any{"client_id": id, "client_name": "CIMD App", "redirect_uris": []string{testRedirect},
			"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	serve := func(extra map[string]any, idOverride string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			d.fetches.Add(1)
			if r.Header.Get("If-None-Match") == `"v1"` {
				d.notModified.Add(1)
				w.Header().Set("Cache-Control", "max-age=60")
				w.WriteHeader(http.StatusNotModified)
				return
			}
			id := d.srv.URL + r.URL.Path
			if idOverride != "" {
				id = idOverride
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("ETag", `"v1"`)
			json.NewEncoder(w).Encode(doc(id, extra))
		}
	}
	mux.Handle("/client.json", serve(nil, ""))
	mux.Handle("/mismatch.json", serve(nil, "https://someone-else.example/client.json"))
	mux.Handle("/confidential.json", serve(map[string]any{"token_endpoint_auth_method": "client_secret_basic"}, ""))
	mux.Handle("/hostile.json", serve(map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}, ""))
	mux.Handle("/huge.json", serve(map[string]any{"client_uri": "https://x.example/" + strings.Repeat("a", 70<<10)}, ""))
	mux.HandleFunc("/redirect.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/client.json", http.StatusFound)
	})
	mux.HandleFunc("/html.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html></html>"))
	})
	d.srv = httptest.NewTLSServer(mux)
	t.Cleanup(d.srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(d.srv.Certificate())
	d.tls = &tls.Config{RootCAs: pool}
	return d
}

func TestClientIDMetadataDocument(t *testing.T) {
	docs := newDocServer(t)
	e := newEnv(t, func(o *oauth.Options) { o.AllowPrivateCIMD = true; o.CIMDTLSConfig = docs.tls })
	clientID := docs.srv.URL + "/client.json"

	b := e.browser(t, "mona")
	p := newPKCE(t)
	params := e.authParams(clientID, p)
	// Look at the consent page on the way.
	res := b.authorizeUntilConsent(params)
	if !strings.Contains(res, "CIMD App") || !strings.Contains(res, clientID) || !strings.Contains(res, "http://127.0.0.1:33418") {
		t.Fatalf("consent page does not show the client:\n%s", res)
	}
	code := b.code(params)
	tok := mustToken(t, e.exchange(t, clientID, code, p))
	if status, who, _ := e.whoami(t, tok.AccessToken); status != 200 || who.Username != "mona" {
		t.Fatalf("whoami: %d %+v", status, who)
	}
	mustToken(t, e.refresh(t, clientID, tok.RefreshToken))
	if n := docs.fetches.Load(); n != 1 {
		t.Fatalf("document fetched %d times within its max-age, want 1", n)
	}
	// Past max-age the document is revalidated with its ETag.
	e.clock.advance(61 * time.Second)
	p = newPKCE(t)
	b.code(e.authParams(clientID, p))
	if docs.notModified.Load() != 1 {
		t.Fatalf("revalidations answered 304: %d, want 1", docs.notModified.Load())
	}
	// A public client: a secret is refused.
	wantOAuthError(t, e.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "client_secret": {"x"}, "refresh_token": {"x"}}), 401, "invalid_client")

	before := e.issued(t)
	for _, c := range []struct{ path, want string }{
		{"/mismatch.json", "must equal the document's URL"},
		{"/confidential.json", "token_endpoint_auth_method none"},
		{"/hostile.json", "javascript"},
		{"/huge.json", "larger than"},
		{"/redirect.json", "redirects are not followed"},
		{"/html.json", "content type"},
		{"/missing.json", "status 404"},
	} {
		res := e.browser(t, "mona").authorize(e.authParams(docs.srv.URL+c.path, newPKCE(t)))
		if res.redirect != nil || res.status != 400 || !strings.Contains(res.page, "invalid_client") || !strings.Contains(res.page, c.want) {
			t.Errorf("%s: want an invalid_client page saying %q, got %d %s", c.path, c.want, res.status, res.page)
		}
	}
	if got := e.issued(t); got != before {
		t.Fatalf("refused documents issued something: %v -> %v", before, got)
	}
}

// TestCIMDPrivateAddress: without the test option, a document on a
// loopback address is never fetched.
func TestCIMDPrivateAddress(t *testing.T) {
	docs := newDocServer(t)
	e := newEnv(t, func(o *oauth.Options) { o.CIMDTLSConfig = docs.tls })
	clientID := docs.srv.URL + "/client.json"
	res := e.browser(t, "nina").authorize(e.authParams(clientID, newPKCE(t)))
	if res.redirect != nil || res.status != 400 || !strings.Contains(res.page, "invalid_client") || !strings.Contains(res.page, "not public") {
		t.Fatalf("want an invalid_client page about the address, got %d %s", res.status, res.page)
	}
	wantOAuthError(t, e.token(t, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {"x"},
		"redirect_uri": {testRedirect}, "code_verifier": {strings.Repeat("a", 43)}}), 401, "invalid_client")
	// localhost by name is refused the same way.
	res = e.browser(t, "nina").authorize(e.authParams(strings.Replace(clientID, "127.0.0.1", "localhost", 1), newPKCE(t)))
	if res.status != 400 || !strings.Contains(res.page, "not public") {
		t.Fatalf("localhost: %d %s", res.status, res.page)
	}
	if n := docs.fetches.Load(); n != 0 {
		t.Fatalf("a private address was fetched %d times", n)
	}
	if got := e.issued(t); got != [2]int{0, 0} {
		t.Fatalf("issued %v", got)
	}
}

// authorizeUntilConsent signs in and returns the consent page without
// answering it.
func (b *browser) authorizeUntilConsent(params url.Values) string {
	b.t.Helper()
	answer := b.answer
	b.answer = "neither"
	defer func() { b.answer = answer }()
	seen := len(b.seen)
	res := b.authorize(params)
	if !slices.Contains(b.seen[seen:], "consent") {
		b.t.Fatalf("no consent page: %+v", res)
	}
	return b.lastConsent
}
