package oauth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/oauth"
)

const regBody = `{"client_name":"Flood","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`

// postRegister posts a registration through client c, with an
// X-Forwarded-For header when xff is not "".
func (e *env) postRegister(t *testing.T, c *http.Client, xff string) (*http.Response, oauthErr) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/oauth/register", strings.NewReader(regBody))
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var oe oauthErr
	if resp.StatusCode != http.StatusCreated {
		if err := json.NewDecoder(resp.Body).Decode(&oe); err != nil {
			t.Fatalf("decode error answer (%d): %v", resp.StatusCode, err)
		}
	}
	return resp, oe
}

// clientFrom is an HTTP client whose connections leave from local, a
// loopback address other than 127.0.0.1, so that berth sees another
// client address.
func clientFrom(t *testing.T, local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// wantTooMany checks a 429 answer: Retry-After in whole seconds within
// max, and an RFC 7591 error body naming the same wait.
func wantTooMany(t *testing.T, resp *http.Response, oe oauthErr, code, says string, max int) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests || oe.Error != code || !strings.Contains(oe.Description, says) {
		t.Fatalf("want 429 %s saying %q, got %d %+v", code, says, resp.StatusCode, oe)
	}
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || n < 1 || n > max {
		t.Fatalf("Retry-After %q, want 1..%d seconds", resp.Header.Get("Retry-After"), max)
	}
	if !strings.Contains(oe.Description, fmt.Sprintf("%d seconds", n)) {
		t.Fatalf("description %q does not say the Retry-After of %d seconds", oe.Description, n)
	}
}

func TestRegistrationRateLimit(t *testing.T) {
	// One token a minute, so that however slow the machine the sixth
	// registration comes before a refill.
	e := newEnv(t, func(o *oauth.Options) { o.RegistrationLimit = oauth.RateLimit{PerMinute: 1, Burst: 5} })
	for i := range 5 {
		if resp, oe := e.postRegister(t, e.http, ""); resp.StatusCode != http.StatusCreated {
			t.Fatalf("registration %d: %d %+v", i+1, resp.StatusCode, oe)
		}
	}
	resp, oe := e.postRegister(t, e.http, "")
	wantTooMany(t, resp, oe, "invalid_request", "too many registrations from this address; retry after", 60)
	// X-Forwarded-For is not believed from an untrusted peer.
	resp, oe = e.postRegister(t, e.http, "198.51.100.7")
	wantTooMany(t, resp, oe, "invalid_request", "too many registrations", 60)
	// Bad metadata is still explained, not rate limited.
	resp2, body := e.postJSON(t, "/oauth/register", `{"client_name":"x"}`, nil)
	if resp2.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_redirect_uri") {
		t.Fatalf("bad metadata while limited: %d %s", resp2.StatusCode, body)
	}
	// Another address has its own budget.
	if resp, oe := e.postRegister(t, clientFrom(t, "127.0.0.2"), ""); resp.StatusCode != http.StatusCreated {
		t.Fatalf("registration from another address: %d %+v", resp.StatusCode, oe)
	}
	if n := e.count(t, "oauth_clients"); n != 6 {
		t.Fatalf("%d clients stored, want 6", n)
	}
	// The bucket refills with the server's clock.
	e.clock.advance(61 * time.Second)
	if resp, oe := e.postRegister(t, e.http, ""); resp.StatusCode != http.StatusCreated {
		t.Fatalf("registration after a minute: %d %+v", resp.StatusCode, oe)
	}
}

func TestRegistrationRateLimitTrustedProxy(t *testing.T) {
	e := newEnv(t, func(o *oauth.Options) {
		o.RegistrationLimit = oauth.RateLimit{PerMinute: 1, Burst: 1}
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	})
	for _, c := range []struct {
		xff     string
		created bool
	}{
		{"203.0.113.7", true},
		{"203.0.113.7", false},
		{"198.51.100.9", true},
		// Trusted hops are skipped from the right; the client is the
		// first untrusted address, whatever it claims to its left.
		{"192.0.2.1, 203.0.113.7, 10.1.2.3", false},
		{"2001:db8:1:2::5", true},
		{"2001:db8:1:2::6", false}, // the same /64
		// A malformed entry stops the walk at the proxy itself.
		{"not-an-address", true},
		{"", false},
	} {
		resp, oe := e.postRegister(t, e.http, c.xff)
		if got := resp.StatusCode == http.StatusCreated; got != c.created {
			t.Fatalf("X-Forwarded-For %q: created=%v, want %v (%d %+v)", c.xff, got, c.created, resp.StatusCode, oe)
		}
		if !c.created {
			wantTooMany(t, resp, oe, "invalid_request", "too many registrations", 60)
		}
	}
}

// tlsFor trusts the certificates of test TLS servers.
func tlsFor(srvs ...*httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	for _, s := range srvs {
		pool.AddCert(s.Certificate())
	}
	return &tls.Config{RootCAs: pool}
}

// cimdHost serves a client ID metadata document at every path, without
// caching headers, and counts the fetches.
type cimdHost struct {
	srv     *httptest.Server
	fetches atomic.Int64
}

func newCIMDHost(t *testing.T) *cimdHost {
	h := &cimdHost{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=60")
		json.NewEncoder(w).Encode(map[string]any{"client_id": h.srv.URL + r.URL.Path, "client_name": "Doc",
			"redirect_uris": []string{testRedirect}, "token_endpoint_auth_method": "none"})
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// startAuthorize sends an authorization request for clientID from a
// browser without a session and returns the answer: a redirect to the
// login page when the client was found.
func (e *env) startAuthorize(t *testing.T, clientID string) (*http.Response, string) {
	t.Helper()
	b := e.browser(t, "")
	req, _ := http.NewRequest("GET", e.url+"/oauth/authorize?"+e.authParams(clientID, newPKCE(t)).Encode(), nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, html.UnescapeString(string(body))
}

// wantClientFound checks that an authorization request for clientID gets
// as far as the login page.
func (e *env) wantClientFound(t *testing.T, clientID string) {
	t.Helper()
	resp, body := e.startAuthorize(t, clientID)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/oauth/login?") {
		t.Fatalf("want a redirect to the login page, got %d %q %s", resp.StatusCode, loc, body)
	}
}

func TestCIMDFetchRateLimit(t *testing.T) {
	h := newCIMDHost(t)
	e := newEnv(t, func(o *oauth.Options) {
		o.AllowPrivateCIMD = true
		o.CIMDTLSConfig = tlsFor(h.srv)
		// Next to nothing refills during the test.
		o.CIMDHostLimit = oauth.RateLimit{PerMinute: 0.01, Burst: 2}
	})
	for _, p := range []string{"/a.json", "/b.json"} {
		e.wantClientFound(t, h.srv.URL+p)
	}
	resp, body := e.startAuthorize(t, h.srv.URL+"/c.json")
	host, _, _ := net.SplitHostPort(strings.TrimPrefix(h.srv.URL, "https://"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "was not fetched: too many documents were fetched from "+host+" recently") {
		t.Fatalf("want a 429 page about the host, got %d (Retry-After %q) %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// The token endpoint refuses the same way, as JSON.
	tr := e.token(t, url.Values{"grant_type": {"authorization_code"}, "client_id": {h.srv.URL + "/d.json"}, "code": {"x"},
		"redirect_uri": {testRedirect}, "code_verifier": {strings.Repeat("a", 43)}})
	if tr.status != http.StatusTooManyRequests || tr.Error != "invalid_client" || !strings.Contains(tr.Description, "too many documents") {
		t.Fatalf("token endpoint: %d %s %s", tr.status, tr.Error, tr.Description)
	}
	if n := h.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2: refused documents must not be fetched", n)
	}
	// Cached documents are still served, and past their max-age a stale
	// copy is better than a refusal.
	e.wantClientFound(t, h.srv.URL+"/a.json")
	e.clock.advance(2 * time.Minute)
	e.wantClientFound(t, h.srv.URL+"/a.json")
	if n := h.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
}

func TestCIMDFetchTotalLimit(t *testing.T) {
	h1, h2 := newCIMDHost(t), newCIMDHost(t)
	e := newEnv(t, func(o *oauth.Options) {
		o.AllowPrivateCIMD = true
		o.CIMDTLSConfig = tlsFor(h1.srv, h2.srv)
		o.CIMDTotalLimit = oauth.RateLimit{PerMinute: 0.01, Burst: 1}
	})
	e.wantClientFound(t, h1.srv.URL+"/a.json")
	resp, body := e.startAuthorize(t, h2.srv.URL+"/a.json")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too many client metadata documents were fetched recently") {
		t.Fatalf("want a 429 page about all fetches, got %d %s", resp.StatusCode, body)
	}
	if n := h1.fetches.Load() + h2.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}
