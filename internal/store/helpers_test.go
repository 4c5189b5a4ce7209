package store_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// wantCode fails the test unless err carries the wire code and its message
// contains every one of words.
func wantCode(t *testing.T, err error, code string, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	d := wire.DetailOf(err)
	if d.Code != code {
		t.Fatalf("code %q, want %q (error: %v)", d.Code, code, err)
	}
	for _, w := range words {
		if !strings.Contains(d.Message, w) {
			t.Errorf("message %q does not mention %q", d.Message, w)
		}
	}
}

func mustUser(t *testing.T, s *store.Store, name string, groups ...string) store.User {
	t.Helper()
	u, _, err := s.EnsureUser(t.Context(), store.NewUser{Username: name, Groups: groups}, "admin", "member", "default")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func hashOf(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func count(t *testing.T, s *store.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
