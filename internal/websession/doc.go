// Package websession is what berth's server-rendered pages share to know
// their browser and trust its forms: the cookie-backed browser session
// (a random token in an HttpOnly cookie, stored as its SHA-256 only), the
// CSRF tokens of forms, keyed by that session (or by a double-submit
// cookie before there is one) and bound to a purpose and to the one
// request a form answers, and the same-origin check of posted forms.
//
// The OAuth login, consent and authorized-apps pages (internal/oauth) use
// it now; the web console will use it too, so that there is one way to
// do these in berth.
package websession
