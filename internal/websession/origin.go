package websession

import (
	"fmt"
	"net/http"
	"time"
)

// CheckOrigin refuses a state-changing request that a browser says came
// from another site (Sec-Fetch-Site, or else an Origin that is not this
// host), with an error saying so. It is a second fence behind the CSRF
// token: a form posted by another site fails here even before its token
// is looked at. Requests without either header (not from a browser) pass,
// and are left to the CSRF token.
func (m *Sessions) CheckOrigin(r *http.Request) error {
	if err := m.origins.Check(r); err != nil {
		return fmt.Errorf("the form was posted from another site (origin %q): %w", r.Header.Get("Origin"), err)
	}
	return nil
}

// FormKey returns the browser's key for the CSRF tokens of forms shown
// before there is a session (a sign-in form): the value of the cookie
// base, set to a fresh random one for ttl when the browser has none. A
// page of another site can neither read the cookie nor make a token from
// it (the double-submit pattern).
func (m *Sessions) FormKey(w http.ResponseWriter, r *http.Request, base string, ttl time.Duration) (string, error) {
	if key := m.FormKeyOf(r, base); key != "" {
		return key, nil
	}
	key, err := RandomToken(formKeyPrefix)
	if err != nil {
		return "", err
	}
	m.SetCookie(w, base, key, ttl)
	return key, nil
}

// FormKeyOf returns the browser's form key in the cookie base, or "" when
// it has none that is well formed.
func (m *Sessions) FormKeyOf(r *http.Request, base string) string {
	c, err := r.Cookie(m.CookieName(base))
	if err != nil || !HasShape(c.Value, formKeyPrefix) {
		return ""
	}
	return c.Value
}
