package oidclogin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// cookiePrefix starts the login cookie's name; the rest is the login's
// CSRF state, so that logins in two tabs do not overwrite each other.
const cookiePrefix = "berth_oidc_"

// pending is what a started login must remember until the provider sends
// the browser back. It travels in the cookie, never in the URL.
type pending struct {
	State       string `json:"s"` // the login's own CSRF state, sent to the provider
	CallerState string `json:"c"` // the caller's opaque state, handed back by Finish
	Nonce       string `json:"n"`
	Verifier    string `json:"v"` // PKCE code verifier
	Expires     int64  `json:"e"` // unix seconds
}

// sealer encrypts and authenticates login cookies with AES-256-GCM, so a
// browser can neither read the PKCE verifier nor forge a login.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (sealer, error) {
	// Derive a dedicated key so the configured secret may be shared with
	// other uses without the cookie's cipher key being reused as-is.
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("berth oidclogin cookie v1"))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return sealer{}, fmt.Errorf("login cookie cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealer{}, fmt.Errorf("login cookie cipher: %w", err)
	}
	return sealer{aead: aead}, nil
}

// seal binds the cookie's name (which carries the state) into the
// ciphertext, so a valid cookie cannot be replayed under another state.
func (s sealer) seal(name string, p pending) (string, error) {
	plain, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode login cookie: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("login cookie nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

func (s sealer) open(name, value string) (pending, error) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return pending{}, fmt.Errorf("login cookie is malformed")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return pending{}, fmt.Errorf("login cookie failed its integrity check (tampered, or sealed with another key)")
	}
	var p pending
	if err := json.Unmarshal(plain, &p); err != nil {
		return pending{}, fmt.Errorf("login cookie content is malformed: %w", err)
	}
	return p, nil
}

// setCookie sets the login cookie; an empty value deletes it.
func (l *Login) setCookie(w http.ResponseWriter, name, value string) {
	maxAge := int(cookieTTL / time.Second)
	if value == "" {
		maxAge = -1
	}
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     l.cookiePath,
		MaxAge:   maxAge,
		Secure:   l.secure,
		HttpOnly: true,
		// Lax lets the cookie ride along the provider's top-level
		// redirect back to us, and no cross-site subrequest.
		SameSite: http.SameSiteLaxMode,
	})
}
