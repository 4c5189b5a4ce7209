package external

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/oauth/oidclogin"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// Config says which issuer's tokens to accept and how to read them.
type Config struct {
	// Issuer is the authorization server's issuer URL; its discovery
	// document (/.well-known/openid-configuration) must name exactly it.
	Issuer string
	// Audience is berth's resource URL; a token's aud must contain it
	// (compared after NormalizeAudience).
	Audience string
	// ScopeClaims are read for scopes, all of them; default scope
	// (space-separated string) and scp (array or string).
	ScopeClaims []string
	// UsernameClaims are tried in order for the user name; default
	// preferred_username, email, sub.
	UsernameClaims []string
	// GroupsClaim names the claim holding groups; empty means none.
	GroupsClaim string
	// HTTPClient fetches discovery and keys; nil means a client with a
	// 30s timeout.
	HTTPClient *http.Client
}

// UserResolver turns the user a token names into a berth principal,
// creating the user when needed. scopes are berth's scope names only.
type UserResolver interface {
	PrincipalFor(ctx context.Context, username, email string, groups []string, scopes []string, tokenID string) (rbac.Principal, error)
}

// Authenticator verifies access tokens of one issuer. It implements
// auth.Authenticator and is safe for concurrent use.
type Authenticator struct {
	cfg      Config
	audience string // normalized
	users    UserResolver
	verifier *oidc.IDTokenVerifier
	now      func() time.Time
}

var _ auth.Authenticator = (*Authenticator)(nil)

// signingAlgs are the asymmetric algorithms accepted; access tokens may
// be signed differently from the ID tokens discovery describes, and a
// symmetric or "none" algorithm is never acceptable here.
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512, oidc.EdDSA,
}

// New discovers the issuer and returns an Authenticator for its tokens.
func New(ctx context.Context, cfg Config, users UserResolver) (*Authenticator, error) {
	if strings.TrimSpace(cfg.Issuer) == "" {
		return nil, fmt.Errorf("external authorization server: issuer is empty")
	}
	if NormalizeAudience(cfg.Audience) == "" {
		return nil, fmt.Errorf("external authorization server %s: audience (berth's resource URL) is empty", cfg.Issuer)
	}
	if users == nil {
		return nil, fmt.Errorf("external authorization server %s: no user resolver", cfg.Issuer)
	}
	if len(cfg.ScopeClaims) == 0 {
		cfg.ScopeClaims = []string{"scope", "scp"}
	}
	if len(cfg.UsernameClaims) == 0 {
		cfg.UsernameClaims = []string{"preferred_username", "email", "sub"}
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover authorization server %s: %w", cfg.Issuer, err)
	}
	a := &Authenticator{cfg: cfg, audience: NormalizeAudience(cfg.Audience), users: users, now: time.Now}
	now := func() time.Time { return a.now() }
	// The audience is checked here, normalized, not by go-oidc's exact
	// client-id match.
	a.verifier = provider.Verifier(&oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: signingAlgs, Now: now})
	return a, nil
}

// Issuer returns the issuer whose tokens are accepted, for the
// protected-resource metadata.
func (a *Authenticator) Issuer() string { return a.cfg.Issuer }

// Authenticate verifies a JWT access token and resolves its user.
// Credentials that are not JWTs are auth.ErrNoMatch; a JWT that fails any
// check is a wire.CodeUnauthorized error naming the check.
func (a *Authenticator) Authenticate(ctx context.Context, credential string) (rbac.Principal, error) {
	if !looksLikeJWT(credential) {
		return rbac.Principal{}, auth.ErrNoMatch
	}
	claims, err := a.verify(ctx, credential)
	if err != nil {
		return rbac.Principal{}, err
	}
	scopes := a.scopes(claims)
	email := oidclogin.Email(claims)
	var candidates []string
	for _, name := range a.cfg.UsernameClaims {
		v := oidclogin.StringClaim(claims, name)
		if name == "email" {
			v = email // an email the issuer says is unverified names nobody
		}
		candidates = append(candidates, v)
	}
	username := oidclogin.Username(candidates...)
	if username == "" {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "the access token names no user (none of the claims %s is set)", strings.Join(a.cfg.UsernameClaims, ", "))
	}
	groups, err := a.groups(claims)
	if err != nil {
		return rbac.Principal{}, err
	}
	p, err := a.users.PrincipalFor(ctx, username, email, groups, scopes, tokenID(claims, credential))
	if err != nil {
		return rbac.Principal{}, fmt.Errorf("resolve user %s of an access token from %s: %w", username, a.cfg.Issuer, err)
	}
	// The issuer's tokens cannot be revoked from here, but what one
	// mints expires no later than it, when it says when it expires.
	if exp, ok := claims["exp"].(float64); ok {
		p.Expires = time.Unix(int64(exp), 0)
	}
	return p, nil
}

// verify lets go-oidc decide (signature via JWKS, issuer, expiry), then
// checks the audience. When go-oidc says no, the unverified claims pick
// the message.
func (a *Authenticator) verify(ctx context.Context, raw string) (map[string]any, error) {
	unverified, err := payloadClaims(raw)
	if err != nil {
		return nil, wire.Errorf(wire.CodeUnauthorized, "malformed access token: %v", err)
	}
	if iss, _ := unverified["iss"].(string); iss != a.cfg.Issuer {
		return nil, wire.Errorf(wire.CodeUnauthorized, "unknown issuer: the access token was issued by %q; this server accepts tokens from %s only", clip(iss), a.cfg.Issuer)
	}
	tok, err := a.verifier.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return nil, wire.Errorf(wire.CodeUnauthorized, "the access token expired at %s", expired.Expiry.UTC().Format(time.RFC3339))
		}
		// Issuer and expiry were ruled out above, so the not-before time
		// (with go-oidc's 5 minute leeway) is the only claim left that
		// can fail; else it is the signature. Telling them apart from the
		// claims, rather than by verifying again, keeps a forged token
		// from costing a second JWKS fetch.
		if nbf, ok := unverified["nbf"].(float64); ok && time.Unix(int64(nbf), 0).After(a.now().Add(5*time.Minute)) {
			return nil, wire.Errorf(wire.CodeUnauthorized, "the access token is not valid before %s", time.Unix(int64(nbf), 0).UTC().Format(time.RFC3339))
		}
		return nil, wire.Errorf(wire.CodeUnauthorized, "bad access token signature: it does not verify against the keys (JWKS) of %s: %v", a.cfg.Issuer, err)
	}
	if !slices.ContainsFunc(tok.Audience, func(aud string) bool { return NormalizeAudience(aud) == a.audience }) {
		if len(tok.Audience) == 0 {
			return nil, wire.Errorf(wire.CodeUnauthorized, "wrong audience: the access token has no audience (aud); it must name this server (%s)", a.cfg.Audience)
		}
		return nil, wire.Errorf(wire.CodeUnauthorized, "wrong audience: the access token is for %q, not for this server (%s)", clip(strings.Join(tok.Audience, ", ")), a.cfg.Audience)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, wire.Errorf(wire.CodeUnauthorized, "read access token claims: %v", err)
	}
	return claims, nil
}

// scopes collects berth's scopes from every scope claim; others' scopes
// (openid, email, another API's) are ignored.
func (a *Authenticator) scopes(claims map[string]any) []string {
	var out []string
	for _, name := range a.cfg.ScopeClaims {
		var names []string
		switch v := claims[name].(type) {
		case string:
			names = strings.Fields(v)
		case []any:
			for _, s := range v {
				if s, ok := s.(string); ok {
					names = append(names, strings.Fields(s)...)
				}
			}
		}
		for _, n := range names {
			if sc, err := rbac.ParseScopes([]string{n}); err == nil && !slices.Contains(out, string(sc[0])) {
				out = append(out, string(sc[0]))
			}
		}
	}
	return out
}

func (a *Authenticator) groups(claims map[string]any) ([]string, error) {
	if a.cfg.GroupsClaim == "" {
		return nil, nil
	}
	switch v := claims[a.cfg.GroupsClaim].(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		var out []string
		for i, g := range v {
			s, ok := g.(string)
			if !ok {
				return nil, wire.Errorf(wire.CodeUnauthorized, "groups claim %q: element %d is not a string", a.cfg.GroupsClaim, i)
			}
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, nil
	default:
		return nil, wire.Errorf(wire.CodeUnauthorized, "groups claim %q is not a string array or a string", a.cfg.GroupsClaim)
	}
}

// tokenID names the token in audits: its jti, else a digest of it (never
// the token itself).
func tokenID(claims map[string]any, raw string) string {
	if jti := oidclogin.StringClaim(claims, "jti"); jti != "" {
		return clip(jti)
	}
	sum := sha256.Sum256([]byte(raw))
	return "jwt-" + hex.EncodeToString(sum[:8])
}

// looksLikeJWT reports whether s is three non-empty base64url parts, the
// compact JWS form; anything else belongs to another authenticator.
func looksLikeJWT(s string) bool {
	parts := 0
	for part := range strings.SplitSeq(s, ".") {
		parts++
		if part == "" || parts > 3 {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return parts == 3
}

// payloadClaims decodes the claims without checking anything; they pick
// an error message, never grant access.
func payloadClaims(raw string) (map[string]any, error) {
	parts := strings.Split(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("payload is not base64url")
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		return nil, fmt.Errorf("payload is not a JSON object")
	}
	return claims, nil
}

func clip(s string) string {
	const limit = 200
	if len(s) > limit {
		return strings.ToValidUTF8(s[:limit], "") + "..."
	}
	return s
}
