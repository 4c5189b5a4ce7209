package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
)

// tokenResponse is the successful answer of RFC 6749 5.1.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// verifierShape is RFC 7636 4.1: 43 to 128 unreserved characters.
var verifierShape = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// token is POST /oauth/token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	form, oe := parseTokenForm(w, r)
	if oe != nil {
		writeOAuthError(w, oe)
		return
	}
	c, err := s.authenticateClient(r.Context(), r, form)
	if err != nil {
		s.failClientAuth(w, r, err)
		return
	}
	var resp tokenResponse
	switch gt := form.Get("grant_type"); gt {
	case grantCode:
		resp, err = s.exchangeCode(r.Context(), c, form)
	case grantRefr:
		resp, err = s.refresh(r.Context(), c, form)
	case "":
		err = oerr(errInvalidRequest, "grant_type is missing")
	default:
		err = oerr(errUnsupportedGrantType, "grant_type %q is not supported; use authorization_code or refresh_token", gt)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// exchangeCode redeems an authorization code. A code presented a second
// time revokes everything issued from it (RFC 6749 4.1.2, RFC 9700 4.5).
func (s *Server) exchangeCode(ctx context.Context, c *client, form url.Values) (tokenResponse, error) {
	code, verifier, redirectURI := form.Get("code"), form.Get("code_verifier"), form.Get("redirect_uri")
	switch {
	case code == "":
		return tokenResponse{}, oerr(errInvalidRequest, "code is missing")
	case verifier == "":
		return tokenResponse{}, oerr(errInvalidRequest, "code_verifier is missing; PKCE is required")
	case !verifierShape.MatchString(verifier):
		return tokenResponse{}, oerr(errInvalidRequest, "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'")
	case redirectURI == "":
		return tokenResponse{}, oerr(errInvalidRequest, "redirect_uri is missing")
	}
	if !hasShape(code, codePrefix) {
		return tokenResponse{}, oerr(errInvalidGrant, "the authorization code is invalid")
	}
	now := s.now()
	return s.redeem(ctx, c, "authorization code reused; grant revoked", "oauth.code.reuse", func(tx *store.OAuthTx) (exchanged, error) {
		stored, err := tx.CodeForUpdate(ctx, hashSecret(code))
		if errors.Is(err, store.ErrNotFound) {
			return refuse(oerr(errInvalidGrant, "the authorization code is invalid"))
		}
		if err != nil {
			return exchanged{}, err
		}
		g := stored.Grant
		grantID, userID, clientID, scopes, resource := g.ID, g.UserID, g.ClientID, g.Scopes, g.Resource
		used, revoked, expires := stored.UsedAt, g.RevokedAt, stored.ExpiresAt
		storedRedirect, challenge := stored.RedirectURI, stored.CodeChallenge
		switch {
		case clientID != c.ID:
			return refuse(oerr(errInvalidGrant, "the authorization code was issued to another client"))
		case used != nil:
			return replayed(ctx, tx, grantID, userID, "authorization code reused",
				oerr(errInvalidGrant, "the authorization code was already used; every token issued from it is now revoked"))
		case revoked != nil:
			return refuse(oerr(errInvalidGrant, "the authorization was revoked"))
		case !now.Before(expires):
			return refuse(oerr(errInvalidGrant, "the authorization code expired"))
		case redirectURI != storedRedirect:
			return refuse(oerr(errInvalidGrant, "redirect_uri differs from the one of the authorization request"))
		case !pkceMatches(verifier, challenge):
			return refuse(oerr(errInvalidGrant, "code_verifier does not match the code_challenge (PKCE)"))
		}
		if oe := s.sameResource(form.Get("resource"), resource); oe != nil {
			return refuse(oe)
		}
		if err := tx.MarkCodeUsed(ctx, hashSecret(code), now); err != nil {
			return exchanged{}, err
		}
		resp, err := s.issueTokens(ctx, tx, grantID, scopes, scopes, c.allowsGrant(grantRefr))
		return exchanged{resp: resp}, err
	})
}

func pkceMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// refresh exchanges a refresh token for a new access token and a new
// refresh token. The old one is spent; presenting it again revokes the
// whole grant (RFC 9700 4.14.2).
func (s *Server) refresh(ctx context.Context, c *client, form url.Values) (tokenResponse, error) {
	if !c.allowsGrant(grantRefr) {
		return tokenResponse{}, oerr(errUnauthorizedClient, "the client is not registered for the refresh_token grant")
	}
	rt := form.Get("refresh_token")
	if rt == "" {
		return tokenResponse{}, oerr(errInvalidRequest, "refresh_token is missing")
	}
	if !hasShape(rt, RefreshTokenPrefix) {
		return tokenResponse{}, oerr(errInvalidGrant, "the refresh token is invalid")
	}
	now := s.now()
	return s.redeem(ctx, c, "refresh token replayed; grant revoked", "oauth.refresh.reuse", func(tx *store.OAuthTx) (exchanged, error) {
		stored, err := tx.RefreshTokenForUpdate(ctx, hashSecret(rt))
		if errors.Is(err, store.ErrNotFound) {
			return refuse(oerr(errInvalidGrant, "the refresh token is invalid"))
		}
		if err != nil {
			return exchanged{}, err
		}
		g := stored.Grant
		tokenID, grantID, userID, clientID, resource := stored.ID, g.ID, g.UserID, g.ClientID, g.Resource
		tokenScopes, expires := stored.Scopes, stored.ExpiresAt
		used, revoked, grantRevoked := stored.UsedAt, stored.RevokedAt, g.RevokedAt
		switch {
		case clientID != c.ID:
			return refuse(oerr(errInvalidGrant, "the refresh token was issued to another client"))
		case grantRevoked != nil || revoked != nil:
			return refuse(oerr(errInvalidGrant, "the refresh token was revoked"))
		case used != nil:
			return replayed(ctx, tx, grantID, userID, "refresh token reused",
				oerr(errInvalidGrant, "the refresh token was already used; the whole authorization is now revoked"))
		case !now.Before(expires):
			return refuse(oerr(errInvalidGrant, "the refresh token expired"))
		}
		accessScopes := tokenScopes
		if raw := form.Get("scope"); raw != "" {
			parsed, err := rbac.ParseScopes(strings.Fields(raw))
			if err != nil {
				return refuse(oerr(errInvalidScope, "%v", err))
			}
			accessScopes = rbac.ScopeStrings(parsed)
			for _, sc := range accessScopes {
				if !slices.Contains(tokenScopes, sc) {
					return refuse(oerr(errInvalidScope, "scope %q was not granted; a refresh can only narrow the scopes", sc))
				}
			}
		}
		if oe := s.sameResource(form.Get("resource"), resource); oe != nil {
			return refuse(oe)
		}
		if err := tx.SpendRefreshToken(ctx, tokenID, now); err != nil {
			return exchanged{}, err
		}
		resp, err := s.issueTokens(ctx, tx, grantID, accessScopes, tokenScopes, true)
		return exchanged{resp: resp}, err
	})
}

// issueTokens stores a new access token (and refresh token) of the grant.
func (s *Server) issueTokens(ctx context.Context, tx *store.OAuthTx, grantID string, accessScopes, refreshScopes []string, withRefresh bool) (tokenResponse, error) {
	now := s.now()
	at, atHash, err := newSecret(AccessTokenPrefix)
	if err != nil {
		return tokenResponse{}, err
	}
	if err := tx.InsertOAuthToken(ctx, grantID, store.OAuthAccess, atHash, accessScopes, now.Add(s.opts.AccessTokenTTL)); err != nil {
		return tokenResponse{}, err
	}
	resp := tokenResponse{
		AccessToken: at, TokenType: "Bearer", ExpiresIn: int64(s.opts.AccessTokenTTL / time.Second),
		Scope: strings.Join(accessScopes, " "),
	}
	if withRefresh {
		rt, rtHash, err := newSecret(RefreshTokenPrefix)
		if err != nil {
			return tokenResponse{}, err
		}
		if err := tx.InsertOAuthToken(ctx, grantID, store.OAuthRefresh, rtHash, refreshScopes, now.Add(s.opts.RefreshTokenTTL)); err != nil {
			return tokenResponse{}, err
		}
		resp.RefreshToken = rt
	}
	// Expired tokens are dead weight (a replayed expired refresh token is
	// refused as unknown); each issue prunes a bounded batch of them, so
	// the table stays the size of what is live without a sweeper.
	if err := tx.PruneOAuthTokens(ctx, now.Add(-time.Hour)); err != nil {
		return tokenResponse{}, err
	}
	return resp, nil
}

// failClientAuth answers a failed client authentication. A client that
// tried the Authorization header gets the Basic challenge RFC 6749 5.2
// asks for, on the token and the revocation endpoints alike.
func (s *Server) failClientAuth(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	if errors.As(err, &oe) && oe.Status == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
	}
	s.fail(w, r, err)
}
