package hostguard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/hostguard"
)

func TestPolicy(t *testing.T) {
	cases := []struct {
		name  string
		opts  hostguard.Options
		host  string
		allow bool
	}{
		{"public host", hostguard.Options{PublicURL: "https://berth.example"}, "berth.example", true},
		{"public host, any case", hostguard.Options{PublicURL: "https://berth.example"}, "BERTH.example", true},
		{"public host with its default port", hostguard.Options{PublicURL: "https://berth.example:443"}, "berth.example", true},
		{"another host", hostguard.Options{PublicURL: "https://berth.example"}, "evil.com", false},
		{"a public host has no loopback aliases", hostguard.Options{PublicURL: "https://berth.example"}, "localhost", false},
		{"loopback alias", hostguard.Options{PublicURL: "http://127.0.0.1:8080"}, "localhost:8080", true},
		{"IPv6 loopback alias", hostguard.Options{PublicURL: "http://localhost:8080"}, "[::1]:8080", true},
		{"loopback name, other port", hostguard.Options{PublicURL: "http://127.0.0.1:8080"}, "localhost:8081", false},
		{"loopback without a port", hostguard.Options{PublicURL: "http://127.0.0.1:8080"}, "localhost", false},
		{"allowed host", hostguard.Options{PublicURL: "http://127.0.0.1:8080", AllowedHosts: []string{"berth.internal:8443"}}, "berth.internal:8443", true},
		{"allowed host on port 80", hostguard.Options{AllowedHosts: []string{"proxy:80"}}, "proxy", true},
		{"nothing configured", hostguard.Options{}, "127.0.0.1:8080", false},
		{"empty Host", hostguard.Options{PublicURL: "http://127.0.0.1:8080"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hostguard.New(c.opts).AllowsHost(c.host); got != c.allow {
				t.Fatalf("AllowsHost(%q) = %v, want %v", c.host, got, c.allow)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	h := hostguard.New(hostguard.Options{PublicURL: "http://127.0.0.1:8080"}).Middleware("/healthz")(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	cases := []struct {
		method, path, host string
		want               int
	}{
		{"GET", "/api/whoami", "127.0.0.1:8080", http.StatusTeapot},
		{"GET", "/api/whoami", "evil.com", http.StatusForbidden},
		{"GET", "/healthz", "10.0.0.7:8080", http.StatusTeapot},
		{"HEAD", "/healthz", "10.0.0.7:8080", http.StatusTeapot},
		// Only reading a probe is exempt.
		{"POST", "/healthz", "evil.com", http.StatusForbidden},
		{"GET", "/healthz/x", "evil.com", http.StatusForbidden},
	}
	for _, c := range cases {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s %s Host %s: %d, want %d", c.method, c.path, c.host, rec.Code, c.want)
		}
		if rec.Code == http.StatusForbidden {
			body := rec.Body.String()
			for _, word := range []string{`\"` + c.host + `\"`, "--public-url", "--allowed-hosts", "DNS rebinding"} {
				if !strings.Contains(body, word) {
					t.Errorf("403 %s does not name %s", body, word)
				}
			}
		}
	}
}

func TestOrigins(t *testing.T) {
	p := hostguard.New(hostguard.Options{PublicURL: "http://127.0.0.1:8080", AllowedOrigins: []string{"https://app.example/"}})
	for origin, want := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "https://app.example": true,
		"http://localhost:9999": false, "https://evil.example": false,
	} {
		if got := p.AllowsOrigin(origin); got != want {
			t.Errorf("AllowsOrigin(%q) = %v, want %v", origin, got, want)
		}
	}
}
