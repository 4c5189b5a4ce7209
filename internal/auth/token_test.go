package auth_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/auth"
)

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		tok, hash, prefix, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, auth.TokenPrefix) || len(tok) != len("berth_")+43 {
			t.Fatalf("token %q has the wrong shape", tok)
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, auth.TokenPrefix))
		if err != nil || len(raw) != 32 {
			t.Fatalf("token body is not base64url of 32 bytes: %v, %d", err, len(raw))
		}
		want := sha256.Sum256([]byte(tok))
		if !bytes.Equal(hash, want[:]) || !bytes.Equal(auth.HashToken(tok), want[:]) {
			t.Fatal("hash is not SHA-256 of the token")
		}
		if prefix != tok[:12] || !strings.HasPrefix(prefix, "berth_") {
			t.Fatalf("prefix %q, token %q", prefix, tok)
		}
		if !auth.LooksLikeToken(tok) {
			t.Fatalf("LooksLikeToken(%q) = false", tok)
		}
		if seen[tok] {
			t.Fatal("duplicate token")
		}
		seen[tok] = true
	}
}

func TestLooksLikeToken(t *testing.T) {
	tok, _, _, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	body := tok[len(auth.TokenPrefix):]
	// 43 characters carry 258 bits for 256: the canonical last character
	// has its two low bits clear, so 'B' (index 1) is never canonical.
	nonCanonical := tok[:len(tok)-1] + "B"
	for _, s := range []string{
		"",
		"berth_",
		body,                           // no prefix
		"Berth_" + body,                // prefix is case-sensitive
		tok[:len(tok)-1],               // short
		tok + "A",                      // long
		tok[:10] + "+" + tok[11:],      // standard base64 alphabet
		tok[:10] + "=" + tok[11:],      // padding
		tok[:len(tok)-2] + "==",        // padded
		nonCanonical,                   // trailing bits set
		"oat_" + body + "xx",           // another credential kind of the same length
		strings.Repeat("x", len(tok)),  // garbage
		tok[:20] + " " + tok[21:],      // space
		tok[:20] + "\u00e9" + tok[22:], // non-ASCII
	} {
		if auth.LooksLikeToken(s) {
			t.Errorf("LooksLikeToken(%q) = true", s)
		}
	}
}
