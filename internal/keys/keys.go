// Package keys derives berth's keys from its one server key, so that each
// use (agent tokens, sealed secrets, sessions, CSRF) has a key of its own
// and none of them can stand in for another.
package keys

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Derive returns the 32-byte key for purpose: HMAC-SHA256(serverKey,
// purpose). Purposes name their use and version ("berth seal v1"), so a
// changed scheme gets new keys.
func Derive(serverKey []byte, purpose string) []byte {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
