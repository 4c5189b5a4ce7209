package oauth

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestValidateRedirectURI(t *testing.T) {
	good := []string{
		"https://app.example/cb", "https://app.example:8443/cb?x=1", "http://127.0.0.1/cb", "http://127.0.0.1:9999/cb",
		"http://[::1]/cb", "http://localhost:3000/callback", "vscode://vscode.github-authentication/did-authenticate",
		"cursor://anysphere.cursor-retrieval/oauth/callback", "com.example.app:/oauth2redirect",
	}
	bad := []string{
		"", "javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "file:///etc/passwd", "vbscript:x",
		"about:blank", "blob:https://a/x", "http://example.com/cb", "http://127.0.0.1.nip.io/cb", "http://10.0.0.1/cb",
		"https://a.example/cb#frag", "https://u:p@a.example/cb", "/relative", "https:///nohost", "ws://localhost/x",
		"https://a.example/c b", "https://a.example/\x00", "custom:opaque", "mailto:a@b.example",
	}
	for _, u := range good {
		if err := validateRedirectURI(u); err != nil {
			t.Errorf("%q refused: %v", u, err)
		}
	}
	for _, u := range bad {
		if err := validateRedirectURI(u); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func TestRedirectMatches(t *testing.T) {
	reg := []string{"http://127.0.0.1/cb", "https://app.example/cb", "http://localhost:8080/cb?x=1"}
	for _, c := range []struct {
		uri  string
		want bool
	}{
		{"https://app.example/cb", true},
		{"http://127.0.0.1:54321/cb", true}, // RFC 8252: any port on loopback
		{"http://localhost:1/cb?x=1", true},
		{"http://localhost:1/cb", false},      // query differs
		{"https://app.example:443/cb", false}, // exact match for https
		{"https://app.example/cb/", false},
		{"http://127.0.0.1:54321/other", false},
		{"http://[::1]:54321/cb", false}, // another loopback host is another URI
		{"https://127.0.0.1:54321/cb", false},
		{"http://127.0.0.1:54321/cb#x", false},
	} {
		if got := redirectMatches(reg, c.uri); got != c.want {
			t.Errorf("redirectMatches(%q) = %v, want %v", c.uri, got, c.want)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://Berth.Example:443/":   "https://berth.example",
		"https://berth.example/mcp/":   "https://berth.example/mcp",
		"HTTP://127.0.0.1:80/mcp":      "http://127.0.0.1/mcp",
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080",
		"https://[::1]:8443/mcp":       "https://[::1]:8443/mcp",
		"https://berth.example/a%2Fb/": "https://berth.example/a%2Fb",
	} {
		got, err := normalizeURL(in)
		if err != nil || got != want {
			t.Errorf("normalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "berth.example", "/mcp", "ftp://berth.example", "https://berth.example/#x", "https://u@berth.example", "mailto:x"} {
		if got, err := normalizeURL(in); err == nil {
			t.Errorf("normalizeURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	f := newCIMDFetcher(false, nil, time.Now, RateLimit{PerMinute: -1}, RateLimit{PerMinute: -1})
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0",
		"100.64.0.1", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "ff02::1", "::ffff:127.0.0.1",
		"::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:a00:1::1", "198.18.0.1"} {
		if err := f.checkAddr(netip.MustParseAddr(a)); err == nil {
			t.Errorf("%s allowed", a)
		}
	}
	for _, a := range []string{"93.184.215.14", "2606:4700::1111", "8.8.8.8"} {
		if err := f.checkAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s refused: %v", a, err)
		}
	}
	open := newCIMDFetcher(true, nil, time.Now, RateLimit{PerMinute: -1}, RateLimit{PerMinute: -1})
	if err := open.checkAddr(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("AllowPrivateCIMD refused loopback: %v", err)
	}
	if err := open.checkAddr(netip.MustParseAddr("0.0.0.0")); err == nil {
		t.Error("AllowPrivateCIMD allowed the unspecified address")
	}
}

func TestCheckCIMDURL(t *testing.T) {
	if err := checkCIMDURL("https://app.example/oauth/client.json"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://app.example/c.json", "https://app.example", "https://app.example/", "https://app.example/c.json#x",
		"https://app.example/c.json?x=1", "https://u@app.example/c.json", "https://app.example/a/../c.json", "https:///c.json"} {
		if err := checkCIMDURL(u); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func TestCacheTTL(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"":                     cimdDefaultTTL,
		"max-age=60":           time.Minute,
		"public, max-age=120":  2 * time.Minute,
		"max-age=99999999":     cimdMaxTTL,
		"no-store":             0,
		"max-age=60, no-cache": 0,
		"max-age=bogus":        cimdDefaultTTL,
	} {
		h := http.Header{}
		if cc != "" {
			h.Set("Cache-Control", cc)
		}
		if got := cacheTTL(h); got != want {
			t.Errorf("cacheTTL(%q) = %s, want %s", cc, got, want)
		}
	}
}

func TestCIMDCacheBounded(t *testing.T) {
	f := newCIMDFetcher(false, nil, time.Now, RateLimit{PerMinute: -1}, RateLimit{PerMinute: -1})
	for i := range cimdCacheEntries * 3 {
		f.store(string(rune('a'+i%26))+time.Duration(i).String(), cimdEntry{expires: time.Now().Add(time.Hour)})
	}
	if n := len(f.cache); n > cimdCacheEntries {
		t.Fatalf("cache holds %d entries, cap %d", n, cimdCacheEntries)
	}
}

func TestSecretShapes(t *testing.T) {
	s, h, err := newSecret(AccessTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if !hasShape(s, AccessTokenPrefix) || hasShape(s, RefreshTokenPrefix) || len(h) != 32 {
		t.Fatalf("shape of %q", s)
	}
	for _, bad := range []string{"", AccessTokenPrefix, s + "A", s[:len(s)-1], "berth_" + s[len(AccessTokenPrefix):]} {
		if hasShape(bad, AccessTokenPrefix) {
			t.Errorf("%q has the shape of an access token", bad)
		}
	}
}

// A loopback berth answers to every loopback name: metadata and
// challenges follow the name the client used, resources under any of them
// map to the public URL, and other names or ports do not.
func TestLoopbackAliases(t *testing.T) {
	const public = "http://127.0.0.1:8080"
	req := func(host string) *http.Request {
		r, _ := http.NewRequest("GET", "http://"+host+"/mcp", nil)
		r.Host = host
		return r
	}
	for host, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"localhost:8080": "http://localhost:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"localhost:9090": public,
		"evil.test:8080": public,
	} {
		if got := requestBase(public, req(host)); got != want {
			t.Errorf("requestBase for Host %s = %s, want %s", host, got, want)
		}
	}
	if got := challengeURL(public, req("localhost:8080")); got != "http://localhost:8080/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("challenge URL %s", got)
	}
	for res, want := range map[string]string{
		"http://localhost:8080/mcp": public + "/mcp",
		"http://[::1]:8080":         public,
		"http://localhost:9090/mcp": "http://localhost:9090/mcp",
		"http://evil.test:8080/mcp": "http://evil.test:8080/mcp",
	} {
		if got := canonicalResource(public, res); got != want {
			t.Errorf("canonicalResource(%s) = %s, want %s", res, got, want)
		}
	}
	if got := requestBase("https://berth.example.com", req("localhost:443")); got != "https://berth.example.com" {
		t.Errorf("a public server must not follow loopback names: %s", got)
	}
}
