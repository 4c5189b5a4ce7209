package oidclogin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/berth-mcp/berth/internal/wire"
)

// Identity is who the provider says logged in, from a verified ID token.
type Identity struct {
	Subject string // the provider's stable id for the user ("sub")
	// Username fits berth's user names: 1-64 of a-z, 0-9, '.', '_', '@',
	// '-'.
	Username string
	Email    string // empty unless the provider did not deny verifying it
	Name     string
	Groups   []string
}

func (l *Login) identity(idt *oidc.IDToken) (Identity, error) {
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, wire.Errorf(wire.CodeBadGateway, "read ID token claims: %w", err)
	}
	id := Identity{
		Subject: idt.Subject,
		Name:    StringClaim(claims, "name"),
		Email:   Email(claims),
	}
	if id.Subject == "" {
		return Identity{}, wire.Errorf(wire.CodeUnauthorized, "the ID token has no subject (sub)")
	}
	id.Username = Username(StringClaim(claims, "preferred_username"), id.Email, id.Subject)
	if l.cfg.GroupsClaim != "" {
		groups, err := groupsClaim(claims, l.cfg.GroupsClaim)
		if err != nil {
			return Identity{}, err
		}
		id.Groups = groups
	}
	if err := l.checkDomain(id.Email); err != nil {
		return Identity{}, err
	}
	return id, nil
}

func (l *Login) checkDomain(email string) error {
	if len(l.cfg.AllowedDomains) == 0 {
		return nil
	}
	allowed := make([]string, 0, len(l.cfg.AllowedDomains))
	for _, d := range l.cfg.AllowedDomains {
		allowed = append(allowed, normalizeDomain(d))
	}
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return wire.Errorf(wire.CodeForbidden, "the identity provider gave no verified email address, and only these email domains may log in: %s", strings.Join(allowed, ", "))
	}
	domain := strings.ToLower(email[at+1:])
	if !slices.Contains(allowed, domain) {
		return wire.Errorf(wire.CodeForbidden, "email domain %q is not allowed to log in (allowed: %s)", clip(domain), strings.Join(allowed, ", "))
	}
	return nil
}

// Username returns the first of the candidates that, lower-cased, is a
// valid berth user name (1-64 of a-z, 0-9, '.', '_', '@', '-'). When none
// is, the first non-empty one is made to fit: other characters become
// '_' and it is cut to 64 bytes. Taking a fitting candidate over mangling
// an earlier one keeps two different users from colliding on one name.
func Username(candidates ...string) string {
	first := ""
	for _, c := range candidates {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "" {
			continue
		}
		if validUsername(c) {
			return c
		}
		if first == "" {
			first = c
		}
	}
	if first == "" {
		return ""
	}
	var b strings.Builder
	for _, r := range first {
		if b.Len() >= 64 {
			break
		}
		if usernameRune(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func validUsername(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !usernameRune(r) {
			return false
		}
	}
	return true
}

func usernameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '@' || r == '-'
}

// StringClaim returns the named claim when it is a string, trimmed, and
// "" otherwise.
func StringClaim(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return strings.TrimSpace(s)
}

// Email returns the email claim unless the issuer says it is not verified
// (email_verified false): an unverified address may be anyone's, so it
// must not name or reach a user. An issuer that does not say either way
// is trusted.
func Email(claims map[string]any) string {
	if falseClaim(claims["email_verified"]) {
		return ""
	}
	return StringClaim(claims, "email")
}

// falseClaim reports whether v says false; some providers send
// email_verified as the string "false".
func falseClaim(v any) bool {
	switch b := v.(type) {
	case bool:
		return !b
	case string:
		return strings.EqualFold(b, "false")
	}
	return false
}

// groupsClaim reads a claim that is a string array or a single string.
func groupsClaim(claims map[string]any, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		if v = strings.TrimSpace(v); v == "" {
			return nil, nil
		}
		return []string{v}, nil
	case []any:
		var out []string
		for i, g := range v {
			s, ok := g.(string)
			if !ok {
				return nil, wire.Errorf(wire.CodeBadGateway, "groups claim %q: element %d is %T, want a string", name, i, g)
			}
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, nil
	default:
		return nil, wire.Errorf(wire.CodeBadGateway, "groups claim %q is %s, want a string array or a string", name, fmt.Sprintf("%T", v))
	}
}
