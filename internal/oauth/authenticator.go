package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Authenticate resolves an access token issued by this server into a
// principal: the user's role bindings with the token's scopes. It
// implements auth.Authenticator; credentials of other formats get
// auth.ErrNoMatch. A token issued for a resource other than this server's
// (RFC 8707 audience) is refused like an unknown one.
func (s *Server) Authenticate(ctx context.Context, credential string) (rbac.Principal, error) {
	if !hasShape(credential, AccessTokenPrefix) {
		return rbac.Principal{}, auth.ErrNoMatch
	}
	hash := hashSecret(credential)
	now := s.now()
	if p, ok := s.cache.Get(hash, now); ok {
		return p, nil
	}
	t, err := s.opts.Store.OAuthAccessTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "unknown access token")
	}
	if err != nil {
		return rbac.Principal{}, err
	}
	tokenID, userID, resource, scopes, expires := t.ID, t.Grant.UserID, t.Grant.Resource, t.Scopes, t.ExpiresAt
	switch {
	case t.RevokedAt != nil || t.Grant.RevokedAt != nil:
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "access token revoked")
	case !now.Before(expires):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "access token expired")
	case !slices.Contains(s.resources, resource):
		return rbac.Principal{}, wire.Errorf(wire.CodeUnauthorized, "access token was issued for another resource (%s), not this server", resource)
	}
	parsed, err := rbac.ParseScopes(scopes)
	if err != nil {
		return rbac.Principal{}, fmt.Errorf("access token %s has bad scopes: %w", tokenID, err)
	}
	p, err := s.opts.Users.PrincipalForUser(ctx, userID, parsed, tokenID)
	if err != nil {
		return rbac.Principal{}, err
	}
	p.Expires = expires
	s.cache.Put(hash, p, now, expires)
	return p, nil
}
