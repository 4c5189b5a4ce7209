package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// TokenPrefix starts every berth session token, so that leaked tokens are
// easy to recognize and to scan for.
const TokenPrefix = "berth_"

const (
	tokenRandomBytes = 32
	// tokenLen is the prefix plus unpadded base64url of the random bytes.
	tokenLen = len(TokenPrefix) + (tokenRandomBytes*8+5)/6
	// displayPrefixLen is how much of a token may be shown and stored in
	// clear to help users tell their tokens apart.
	displayPrefixLen = 12
)

// NewToken returns a fresh session token ("berth_" + base64url of 32
// random bytes), the SHA-256 hash to store instead of it, and the display
// prefix (its first 12 characters).
func NewToken() (token string, hash []byte, prefix string, err error) {
	b := make([]byte, tokenRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, "", fmt.Errorf("new token: read random bytes: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), token[:displayPrefixLen], nil
}

// HashToken returns the SHA-256 of the whole token. The token carries 256
// random bits, so a plain hash is enough: there is nothing to brute-force.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// LooksLikeToken reports whether s has the exact shape of a berth session
// token. Authenticators use it to pass other credential kinds on without
// a database lookup.
func LooksLikeToken(s string) bool {
	if len(s) != tokenLen || !strings.HasPrefix(s, TokenPrefix) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s[len(TokenPrefix):])
	return err == nil && len(b) == tokenRandomBytes
}
