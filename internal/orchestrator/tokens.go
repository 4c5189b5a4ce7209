package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Self-service session tokens: a signed-in user (through any adapter:
// REST, MCP, the CLI's remote form, the console) mints, lists and revokes
// their own tokens; a global admin lists and revokes anyone's. The rules
// here are the only ones: a new token never holds more than the
// credential that asked for it nor more than the user's roles can use,
// and it always expires.

// Token is a session token as its owner and admins see it; the secret is
// never part of it.
type Token struct {
	ID         string     `json:"id" jsonschema:"the token id (use it to revoke)"`
	Name       string     `json:"name" jsonschema:"the label it was created with"`
	Prefix     string     `json:"prefix" jsonschema:"the first characters of the secret, to recognise it"`
	UserID     string     `json:"user_id" jsonschema:"the user it acts as"`
	Username   string     `json:"username" jsonschema:"the user it acts as, by name"`
	Scopes     []string   `json:"scopes" jsonschema:"what it allows"`
	State      string     `json:"state" jsonschema:"active, expired or revoked"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty" jsonschema:"recorded at most once a minute"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Token states.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

func tokenView(t store.Token, username string, now time.Time) Token {
	v := Token{
		ID: t.ID, Name: t.Name, Prefix: t.Prefix, UserID: t.UserID, Username: username,
		Scopes: nonNilStrings(t.Scopes), State: TokenActive, CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt,
	}
	switch {
	case t.RevokedAt != nil:
		v.State = TokenRevoked
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		v.State = TokenExpired
	}
	return v
}

// CreateTokenInput asks for a session token for the caller.
type CreateTokenInput struct {
	Name   string   `json:"name" jsonschema:"a label saying where the token is used, e.g. laptop-vscode (1-64 characters)"`
	Scopes []string `json:"scopes,omitempty" jsonschema:"berth:read, berth:write, berth:exec, berth:admin; no more than your credential holds (default: read, write and exec, as far as you hold them)"`
	// ExpiresIn is in seconds, as OAuth's expires_in.
	ExpiresIn int64 `json:"expires_in,omitempty" jsonschema:"lifetime in seconds (default 30 days; the server sets a maximum, 365 days unless configured); never past the expiry of the credential making it"`
}

// CreatedToken is a new token with its secret, shown this once.
type CreatedToken struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret" jsonschema:"the token itself: send it as Authorization: Bearer <secret>; it is shown only now"`
}

// ListTokensInput filters list_tokens.
type ListTokensInput struct {
	All bool `json:"all,omitempty" jsonschema:"everyone's tokens, not only yours (admins only)"`
}

// TokenList is list_tokens' answer.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// TokenRef names a token.
type TokenRef struct {
	TokenID string `json:"token_id" jsonschema:"the token's id (from list_tokens or create_token)"`
}

const maxTokenName = 64

func checkTokenName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return wire.Errorf(wire.CodeBadRequest, "name is empty: give the token a label saying where it is used")
	case len(name) > maxTokenName:
		return wire.Errorf(wire.CodeBadRequest, "name is %d bytes, at most %d allowed", len(name), maxTokenName)
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return wire.Errorf(wire.CodeBadRequest, "name has a control character; use printable characters")
	}
	return nil
}

// tokenScopes decides the scopes of a token p asks for: asked when given,
// else read, write and exec as far as p holds them. Each must be held by
// p's credential and usable by p's roles.
func tokenScopes(p rbac.Principal, asked []string) ([]rbac.Scope, error) {
	usable := rbac.UsableScopes(p.Bindings)
	holds := func(sc rbac.Scope) bool { return rbac.HasScope(p.Scopes, sc) && slices.Contains(usable, sc) }
	if len(asked) == 0 {
		var out []rbac.Scope
		for _, sc := range []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec} {
			if holds(sc) {
				out = append(out, sc)
			}
		}
		if len(out) == 0 {
			return nil, wire.Errorf(wire.CodeForbidden, "your credential holds no scope a token could carry")
		}
		return out, nil
	}
	want, err := rbac.ParseScopes(asked)
	if err != nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "scopes: %v", err)
	}
	var out []rbac.Scope
	for _, sc := range want {
		if !holds(sc) {
			why := "your credential does not hold it"
			if rbac.HasScope(p.Scopes, sc) {
				why = "your roles cannot use it"
			}
			return nil, wire.Errorf(wire.CodeForbidden, "scope %s: %s; a token never holds more than the credential that creates it", sc, why)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

func (s *Service) tokenExpiry(seconds int64) (time.Time, error) {
	if seconds < 0 {
		return time.Time{}, wire.Errorf(wire.CodeBadRequest, "expires_in is %d: give a positive number of seconds, or none for the default of %s", seconds, days(s.cfg.TokenDefaultTTL))
	}
	ttl := s.cfg.TokenDefaultTTL
	if seconds > 0 {
		if seconds > int64(s.cfg.TokenMaxTTL/time.Second) {
			return time.Time{}, wire.Errorf(wire.CodeBadRequest, "expires_in is %d seconds, longer than this server's maximum of %d (%s)", seconds, int64(s.cfg.TokenMaxTTL/time.Second), days(s.cfg.TokenMaxTTL))
		}
		ttl = time.Duration(seconds) * time.Second
	}
	return s.now().Add(ttl), nil
}

// days writes a lifetime the way people say it.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		n := int(d / (24 * time.Hour))
		if n == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", n)
	}
	return d.String()
}

// TokenLimits are the lifetimes the server allows, for forms.
type TokenLimits struct {
	Default, Max time.Duration
}

// TokenLimits tells the default and longest token lifetime.
func (s *Service) TokenLimits() TokenLimits {
	return TokenLimits{Default: s.cfg.TokenDefaultTTL, Max: s.cfg.TokenMaxTTL}
}

// CreateMyToken mints a session token for the caller. The secret is in
// the answer only; berth keeps its hash. The new token never outlives
// nor outranks the credential that mints it: its scopes are within the
// credential's, its expiry is capped at the credential's, and revoking
// the credential revokes it (store.NewToken.MintedWith).
func (s *Service) CreateMyToken(ctx context.Context, p rbac.Principal, in CreateTokenInput) (CreatedToken, error) {
	if err := s.authorize(ctx, p, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: p.UserID}, ""); err != nil {
		return CreatedToken{}, err
	}
	if err := checkTokenName(in.Name); err != nil {
		return CreatedToken{}, err
	}
	scopes, err := tokenScopes(p, in.Scopes)
	if err != nil {
		return CreatedToken{}, err
	}
	exp, err := s.tokenExpiry(in.ExpiresIn)
	if err != nil {
		return CreatedToken{}, err
	}
	if !p.Expires.IsZero() && p.Expires.Before(exp) {
		exp = p.Expires
	}
	secret, hash, prefix, err := auth.NewToken()
	if err != nil {
		return CreatedToken{}, fmt.Errorf("generate token: %w", err)
	}
	tok, err := s.store.CreateToken(ctx, store.NewToken{
		UserID: p.UserID, Name: strings.TrimSpace(in.Name), Prefix: prefix, Hash: hash,
		Scopes: rbac.ScopeStrings(scopes), ExpiresAt: &exp, MintedWith: p.TokenID,
	})
	if errors.Is(err, store.ErrTokenRevoked) {
		return CreatedToken{}, wire.Errorf(wire.CodeUnauthorized, "the credential this call was made with was revoked meanwhile; it mints nothing")
	}
	if err != nil {
		return CreatedToken{}, fmt.Errorf("create token for %s: %w", p.Username, err)
	}
	s.audit(ctx, p, "token.create", "token", tok.ID, "", "ok", map[string]any{"name": tok.Name, "scopes": tok.Scopes, "expires_at": exp.UTC()})
	return CreatedToken{Token: tokenView(tok, p.Username, s.now()), Secret: secret}, nil
}

// ListMyTokens lists the caller's tokens, or with All everyone's (global
// admins), newest first; revoked and expired ones included.
func (s *Service) ListMyTokens(ctx context.Context, p rbac.Principal, in ListTokensInput) (TokenList, error) {
	userID := p.UserID
	if in.All {
		if err := s.authorize(ctx, p, rbac.ActionUserAdmin, rbac.Resource{Kind: "token"}, ""); err != nil {
			return TokenList{}, err
		}
		userID = ""
	} else if err := s.authorize(ctx, p, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: p.UserID}, ""); err != nil {
		return TokenList{}, err
	}
	toks, err := s.store.ListTokensWithUsers(ctx, userID)
	if err != nil {
		return TokenList{}, err
	}
	now := s.now()
	out := TokenList{Tokens: make([]Token, len(toks))}
	for i, t := range toks {
		out.Tokens[i] = tokenView(t.Token, t.Username, now)
	}
	return out, nil
}

// RevokeMyToken revokes one of the caller's tokens; a global admin may
// revoke anyone's. Another user's token is "not found" to everyone else,
// so ids cannot be probed. Revoking twice is not an error.
func (s *Service) RevokeMyToken(ctx context.Context, p rbac.Principal, in TokenRef) (Token, error) {
	if err := s.authorize(ctx, p, rbac.ActionTokenManage, rbac.Resource{Kind: "token", OwnerID: p.UserID}, in.TokenID); err != nil {
		return Token{}, err
	}
	if in.TokenID == "" {
		return Token{}, wire.Errorf(wire.CodeBadRequest, "token_id is empty")
	}
	owner := p.UserID
	if rbac.Authorize(p, rbac.ActionUserAdmin, rbac.Resource{Kind: "token"}) == nil {
		owner = ""
	}
	tok, username, err := s.store.RevokeTokenOf(ctx, in.TokenID, owner)
	if errors.Is(err, store.ErrNotFound) {
		return Token{}, wire.Errorf(wire.CodeNotFound, "token %s not found", in.TokenID)
	}
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %s: %w", in.TokenID, err)
	}
	// This replica stops honouring it at once; others within
	// auth.PrincipalTTL.
	s.cache.Forget()
	s.audit(ctx, p, "token.revoke", "token", tok.ID, "", "ok", map[string]any{"user": username, "name": tok.Name})
	return tokenView(tok, username, s.now()), nil
}
