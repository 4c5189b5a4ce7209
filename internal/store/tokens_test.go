package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/store/storetest"
	"github.com/berth-mcp/berth/internal/wire"
)

func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	now := time.Now()
	exp := now.Add(time.Hour)
	clear := "brt_0123456789abcdefghijklmnopqrstuv"
	tok, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Name: "laptop", Prefix: clear[:12], Hash: hashOf(clear), Scopes: []string{"mcp", "api"}, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID == "" || tok.UserID != u.ID || tok.Prefix != clear[:12] || tok.ExpiresAt == nil || tok.RevokedAt != nil {
		t.Fatalf("created token %+v", tok)
	}
	// The clear token appears nowhere in the stored row.
	if n := count(t, s, `SELECT count(*) FROM session_tokens t WHERE row_to_json(t)::text LIKE '%' || $1 || '%'`, clear); n != 0 {
		t.Fatal("the clear token is stored")
	}

	got, gu, err := s.TokenByHash(ctx, hashOf(clear), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || gu.ID != u.ID || gu.Username != "alice" || strings.Join(got.Scopes, ",") != "mcp,api" {
		t.Fatalf("lookup: token %+v user %+v", got, gu)
	}

	// Unknown token: not found, and neither revoked nor expired.
	_, _, err = s.TokenByHash(ctx, hashOf("other"), now)
	wantCode(t, err, wire.CodeNotFound, "token not found")
	if errors.Is(err, store.ErrTokenExpired) || errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("unknown token answered as %v", err)
	}
	_, _, err = s.TokenByHash(ctx, []byte("short"), now)
	wantCode(t, err, wire.CodeNotFound)

	// Expired at its expiry instant.
	_, _, err = s.TokenByHash(ctx, hashOf(clear), exp)
	wantCode(t, err, wire.CodeNotFound, "expired")
	if !errors.Is(err, store.ErrTokenExpired) || !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrTokenRevoked) {
		t.Fatalf("expired token: %v", err)
	}

	// A disabled user's token stops working.
	if _, err := s.SetUserDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.TokenByHash(ctx, hashOf(clear), now)
	if !errors.Is(err, store.ErrUserDisabled) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("disabled user: %v", err)
	}
	if _, err := s.SetUserDisabled(ctx, u.ID, false); err != nil {
		t.Fatal(err)
	}

	// Revoked wins over expired, and revoking twice keeps the first time.
	if err := s.RevokeToken(ctx, tok.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.TokenByHash(ctx, hashOf(clear), exp.Add(time.Hour))
	wantCode(t, err, wire.CodeNotFound, "revoked")
	if !errors.Is(err, store.ErrTokenRevoked) || !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrTokenExpired) {
		t.Fatalf("revoked token: %v", err)
	}
	list, _ := s.ListTokens(ctx, u.ID)
	if len(list) != 1 || list[0].RevokedAt == nil {
		t.Fatalf("tokens after revoke: %+v", list)
	}
	first := *list[0].RevokedAt
	if err := s.RevokeToken(ctx, tok.ID, ""); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	list, _ = s.ListTokens(ctx, u.ID)
	if !list[0].RevokedAt.Equal(first) {
		t.Fatalf("revoked_at moved from %v to %v", first, list[0].RevokedAt)
	}
}

func TestTokenWithoutExpiry(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	u := mustUser(t, s, "alice")
	if _, err := s.CreateToken(t.Context(), store.NewToken{UserID: u.ID, Hash: hashOf("x")}); err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.TokenByHash(t.Context(), hashOf("x"), time.Now().AddDate(100, 0, 0))
	if err != nil {
		t.Fatalf("token without expiry: %v", err)
	}
	if tok.Scopes == nil || len(tok.Scopes) != 0 {
		t.Fatalf("scopes %#v, want empty", tok.Scopes)
	}
}

func TestCreateTokenErrors(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	if _, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("a"), Scopes: []string{"mcp"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("a"), Scopes: []string{"mcp"}})
	wantCode(t, err, wire.CodeConflict, "token_hash")
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("%v is not ErrConflict", err)
	}
	_, err = s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: []byte("not a sha-256")})
	wantCode(t, err, wire.CodeBadRequest, "token_hash", "32 bytes")
	_, err = s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("b"), Prefix: "0123456789abcdef"})
	wantCode(t, err, wire.CodeBadRequest, "token_prefix")
	_, err = s.CreateToken(ctx, store.NewToken{UserID: "00000000-0000-0000-0000-000000000000", Hash: hashOf("c")})
	wantCode(t, err, wire.CodeNotFound, "user_id")
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%v is not ErrNotFound", err)
	}
	_, err = s.CreateToken(ctx, store.NewToken{UserID: "bob", Hash: hashOf("d")})
	wantCode(t, err, wire.CodeNotFound, "bob")
}

func TestTouchTokenThrottles(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	u := mustUser(t, s, "alice")
	tok, err := s.CreateToken(ctx, store.NewToken{UserID: u.ID, Hash: hashOf("t")})
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		t.Helper()
		list, err := s.ListTokens(ctx, u.ID)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListTokens: %+v, %v", list, err)
		}
		return list[0].LastUsedAt
	}
	if lastUsed() != nil {
		t.Fatal("new token has a last use")
	}
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	step := func(now time.Time, want time.Time) {
		t.Helper()
		if err := s.TouchToken(ctx, tok.ID, now, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); got == nil || !got.Equal(want) {
			t.Fatalf("touch at %v: last_used_at %v, want %v", now, got, want)
		}
	}
	step(t0, t0)                                         // first use is always written
	step(t0.Add(30*time.Second), t0)                     // within the interval: no write
	step(t0.Add(time.Minute), t0)                        // exactly the interval: still no write
	step(t0.Add(61*time.Second), t0.Add(61*time.Second)) // older than the interval: written
	step(t0, t0.Add(61*time.Second))                     // never backwards

	err = s.TouchToken(ctx, "00000000-0000-0000-0000-000000000000", t0, time.Minute)
	wantCode(t, err, wire.CodeNotFound)
	err = s.TouchToken(ctx, "junk", t0, time.Minute)
	wantCode(t, err, wire.CodeNotFound)
}

func TestListAndRevokeTokensByOwner(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := t.Context()
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	a1, _ := s.CreateToken(ctx, store.NewToken{UserID: alice.ID, Hash: hashOf("a1")})
	_, _ = s.CreateToken(ctx, store.NewToken{UserID: alice.ID, Hash: hashOf("a2")})
	b1, err := s.CreateToken(ctx, store.NewToken{UserID: bob.ID, Hash: hashOf("b1")})
	if err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string]int{alice.ID: 2, bob.ID: 1, "": 3, "junk": 0} {
		list, err := s.ListTokens(ctx, who)
		if err != nil || len(list) != want {
			t.Errorf("ListTokens(%q): %d tokens, err %v; want %d", who, len(list), err, want)
		}
	}
	// Bob cannot revoke Alice's token, and cannot tell it exists.
	err = s.RevokeToken(ctx, a1.ID, bob.ID)
	wantCode(t, err, wire.CodeNotFound)
	if _, _, err := s.TokenByHash(ctx, hashOf("a1"), time.Now()); err != nil {
		t.Fatalf("alice's token broken by bob's attempt: %v", err)
	}
	if err := s.RevokeToken(ctx, b1.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.RevokeToken(ctx, "00000000-0000-0000-0000-000000000000", ""), wire.CodeNotFound)
	wantCode(t, s.RevokeToken(ctx, "junk", ""), wire.CodeNotFound)
}
