package oauth_test

import (
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// TestDevLoginOnlyOnLoopback: the password-less login is refused by New
// itself for an issuer anyone else can reach, whoever builds the server.
func TestDevLoginOnlyOnLoopback(t *testing.T) {
	orch := orchtest.New(t, agentBin, orchestrator.Config{})
	opts := func(publicURL string, dev bool) oauth.Options {
		return oauth.Options{PublicURL: publicURL, Store: orch.Store, Users: orch.Svc.Identity, DevLogin: dev}
	}
	for _, u := range []string{"https://berth.example.com", "http://10.0.0.5:8080", "http://0.0.0.0:8080", "http://[2001:db8::1]:8080",
		"http://localhost.example.com", "http://127.0.0.1.nip.io:8080"} {
		_, err := oauth.New(opts(u, true))
		if err == nil {
			t.Errorf("%s: the development login was accepted", u)
			continue
		}
		if !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: the error does not name the issuer and why: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080", "http://127.0.0.2"} {
		if _, err := oauth.New(opts(u, true)); err != nil {
			t.Errorf("%s: loopback refused: %v", u, err)
		}
	}
}
