package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

// TestDevLoginFlagNeedsLoopback: --dev-login is refused when berth
// listens off loopback (main's rule) or is reached at a public URL off
// loopback (oauth.New's), each error naming the address at fault; the
// default turns it on only on loopback.
func TestDevLoginFlagNeedsLoopback(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	key := make([]byte, 32)
	setup := func(f authFlags, publicURL, listen string) (authSetup, error) {
		f.mode = "builtin"
		return setupAuth(t.Context(), f, publicURL, listen, e.Store, e.Svc, key, slog.New(slog.DiscardHandler))
	}
	forced := authFlags{devLogin: true, devLoginSet: true}
	if _, err := setup(forced, "https://berth.example.com", "127.0.0.1:8080"); err == nil ||
		!strings.Contains(err.Error(), "https://berth.example.com") || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("--dev-login with a public URL off loopback: %v", err)
	}
	if _, err := setup(forced, "http://127.0.0.1:8080", "0.0.0.0:8080"); err == nil || !strings.Contains(err.Error(), "0.0.0.0:8080") {
		t.Errorf("--dev-login listening on every address: %v", err)
	}
	s, err := setup(forced, "http://127.0.0.1:8080", "127.0.0.1:8080")
	if err != nil || !strings.Contains(s.summary, "DEVELOPMENT login") {
		t.Errorf("--dev-login on loopback: %q %v", s.summary, err)
	}
	// Unset, it is on for loopback only.
	if s, err := setup(authFlags{}, "https://berth.example.com", "127.0.0.1:8080"); err != nil || strings.Contains(s.summary, "DEVELOPMENT") {
		t.Errorf("default off loopback: %q %v", s.summary, err)
	}
}
