package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/berth-mcp/berth/internal/websession"
)

// Prefixes of the secrets this package issues. Each kind has its own, so a
// leaked secret says what it is and a secret of one kind is never accepted
// as another.
const (
	AccessTokenPrefix  = "berth_at_"
	RefreshTokenPrefix = "berth_rt_"
	codePrefix         = "berth_ac_"
	clientSecretPrefix = "berth_cs_"
	regTokenPrefix     = "berth_rat_"
	loginPrefix        = "berth_lr_"
	clientIDPrefix     = "berth_client_"
)

// newSecret returns prefix + base64url of 32 random bytes and its hash.
func newSecret(prefix string) (string, []byte, error) {
	s, err := websession.RandomToken(prefix)
	if err != nil {
		return "", nil, err
	}
	return s, hashSecret(s), nil
}

// hashSecret is SHA-256: the secrets carry 256 random bits, so there is
// nothing to brute-force and no need for a slow hash.
func hashSecret(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// hasShape reports whether s is exactly a secret of the given prefix, so
// that other credential kinds are passed on without a database lookup.
func hasShape(s, prefix string) bool { return websession.HasShape(s, prefix) }

// newClientID returns a fresh client identifier for a registered client.
// It is not a secret, so it is stored in clear.
func newClientID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return clientIDPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
