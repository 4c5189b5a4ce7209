package auth

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// challenge builds a Bearer WWW-Authenticate value (RFC 6750 section 3).
// Parameters keep the order they are added in.
type challenge struct {
	b strings.Builder
}

func newChallenge(realm string) *challenge {
	if realm == "" {
		realm = "berth"
	}
	c := &challenge{}
	c.b.WriteString("Bearer")
	c.add("realm", realm)
	return c
}

// add appends name="value", skipping empty values.
func (c *challenge) add(name, value string) {
	if value == "" {
		return
	}
	if c.b.Len() > len("Bearer") {
		c.b.WriteByte(',')
	}
	c.b.WriteByte(' ')
	c.b.WriteString(name)
	c.b.WriteByte('=')
	c.b.WriteString(quote(value))
}

func (c *challenge) String() string { return c.b.String() }

// quote makes an HTTP quoted-string. Characters that may not appear in a
// header (controls, and non-ASCII, which RFC 6750 forbids in its
// parameters) become '?', so that no message can split the header.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (o MiddlewareOptions) metadataURL(r *http.Request) string {
	if o.ResourceMetadataURL == nil {
		return ""
	}
	return o.ResourceMetadataURL(r)
}

func (o MiddlewareOptions) endpointScopes(r *http.Request) string {
	if o.Scopes == nil {
		return ""
	}
	return strings.Join(o.Scopes(r), " ")
}

// writeJSONError writes the standard error body with status from code
// (wire.WriteError, so a 503 says when to retry), never cached.
func writeJSONError(w http.ResponseWriter, code, message string) {
	w.Header().Set("Cache-Control", "no-store")
	wire.WriteError(w, &wire.ErrorDetail{Code: code, Message: message})
}

// WriteInsufficientScope answers 403 with an insufficient_scope challenge
// so that an OAuth client can ask the user for more (step-up
// authorization). Its scope parameter names every scope in needed
// together with those the caller's token already has: clients request
// exactly the challenge's scopes, and a token for the missing ones alone
// would lose what the old one could do (the MCP authorization spec
// 2025-11-25 recommends the union). message, when empty, names only the
// scopes the token lacks.
func WriteInsufficientScope(w http.ResponseWriter, r *http.Request, opts MiddlewareOptions, needed []rbac.Scope, message string) {
	var missing []string
	for _, s := range needed {
		if !slices.Contains(missing, string(s)) {
			missing = append(missing, string(s))
		}
	}
	if message == "" {
		message = "token lacks scope " + strings.Join(missing, " ")
	}
	all := slices.Clone(missing)
	if p, ok := PrincipalFrom(r.Context()); ok {
		for _, s := range p.Scopes {
			if !slices.Contains(all, string(s)) {
				all = append(all, string(s))
			}
		}
	}
	c := newChallenge(opts.Realm)
	c.add("error", "insufficient_scope")
	c.add("scope", strings.Join(all, " "))
	c.add("resource_metadata", opts.metadataURL(r))
	w.Header().Set("WWW-Authenticate", c.String())
	writeJSONError(w, wire.CodeForbidden, message)
}

// WriteDenied answers an rbac.Authorize refusal: 403 insufficient_scope
// when the token lacks scopes, 404 when the resource must stay hidden,
// else 403. Errors that are not a *rbac.Denied are answered from their
// wire code.
func WriteDenied(w http.ResponseWriter, r *http.Request, opts MiddlewareOptions, err error) {
	var d *rbac.Denied
	if errors.As(err, &d) && len(d.MissingScopes) > 0 {
		WriteInsufficientScope(w, r, opts, d.MissingScopes, d.Reason)
		return
	}
	det := wire.DetailOf(err)
	writeJSONError(w, det.Code, det.Message)
}
