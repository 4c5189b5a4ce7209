package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OAuthGrant is one authorization of a client by a user: its code and
// every token descending from it. Revoking it revokes them all.
type OAuthGrant struct {
	ID, UserID, ClientID string
	Scopes               []string
	Resource             string
	RevokedAt            *time.Time
}

// NewOAuthCode is an authorization code to store with its new grant.
type NewOAuthCode struct {
	CodeHash                []byte
	UserID, ClientID        string
	Scopes                  []string
	Resource                string
	RedirectURI             string
	CodeChallenge           string
	ExpiresAt               time.Time
	PruneCodesExpiredBefore time.Time
}

// CreateOAuthCode stores a new grant and its authorization code, and
// drops codes that expired before c.PruneCodesExpiredBefore.
func (s *Store) CreateOAuthCode(ctx context.Context, c NewOAuthCode) error {
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_codes WHERE expires_at < $1`, c.PruneCodesExpiredBefore); err != nil {
			return err
		}
		var grantID string
		if err := tx.QueryRow(ctx, `INSERT INTO oauth_grants (user_id, client_id, scopes, resource) VALUES ($1, $2, $3, $4) RETURNING id::text`,
			c.UserID, c.ClientID, nonNil(c.Scopes), c.Resource).Scan(&grantID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			c.CodeHash, grantID, c.RedirectURI, c.CodeChallenge, c.ExpiresAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("store authorization code: %w", mapError(err))
	}
	return nil
}

// OAuthAccessToken is a stored access token with its grant.
type OAuthAccessToken struct {
	ID        string
	Grant     OAuthGrant
	Scopes    []string
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// OAuthAccessTokenByHash returns an access token and its grant, whatever
// their state (the caller tells revoked from expired); ErrNotFound when
// there is none.
func (s *Store) OAuthAccessTokenByHash(ctx context.Context, hash []byte) (OAuthAccessToken, error) {
	var t OAuthAccessToken
	err := s.Pool.QueryRow(ctx, `
		SELECT t.id::text, g.id::text, g.user_id::text, g.client_id, g.resource, g.scopes, g.revoked_at, t.scopes, t.expires_at, t.revoked_at
		FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE t.token_hash = $1 AND t.kind = 'access'`, hash).
		Scan(&t.ID, &t.Grant.ID, &t.Grant.UserID, &t.Grant.ClientID, &t.Grant.Resource, &t.Grant.Scopes, &t.Grant.RevokedAt,
			&t.Scopes, &t.ExpiresAt, &t.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return OAuthAccessToken{}, notFound("access token not found")
	}
	if err != nil {
		return OAuthAccessToken{}, fmt.Errorf("look up access token: %w", mapError(err))
	}
	return t, nil
}

// RevokeOAuthToken revokes the token whose hash is given, when it was
// issued to clientID: an access token alone, a refresh token with its
// whole grant. An unknown token or another client's is left alone without
// an error (RFC 7009 2.2).
func (s *Store) RevokeOAuthToken(ctx context.Context, hash []byte, clientID string) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		var id, kind, grantID, owner string
		err := tx.QueryRow(ctx, `
			SELECT t.id::text, t.kind, t.grant_id::text, g.client_id FROM oauth_tokens t
			JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1`, hash).
			Scan(&id, &kind, &grantID, &owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != clientID) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up token: %w", err)
		}
		if kind == "refresh" {
			return revokeGrantsWhere(ctx, tx, `id = $1`, "refresh token revoked by the client", grantID)
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1`, id); err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		return revokeMinted(ctx, tx, `parent_oauth_token_id = $1`, id)
	})
}
