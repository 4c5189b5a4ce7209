// Package external accepts JWT access tokens issued by an existing
// authorization server (--auth-mode external). It owns their checks:
// signature against the issuer's JWKS, issuer, audience (berth's resource
// URL, compared normalized), expiry, and the reading of scopes and the
// user from the claims. Turning that user into a berth principal is left
// to a UserResolver.
package external
