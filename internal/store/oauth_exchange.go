package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OAuthTx is one exchange at the token endpoint: the code or refresh
// token it redeems is locked until the transaction ends, so two
// concurrent presentations cannot both succeed.
type OAuthTx struct {
	tx pgx.Tx
}

// InOAuthTx runs fn in a transaction (InTx: it may run again on a
// serialization failure, so fn must have no other side effects).
func (s *Store) InOAuthTx(ctx context.Context, fn func(*OAuthTx) error) error {
	return s.InTx(ctx, func(tx pgx.Tx) error { return fn(&OAuthTx{tx: tx}) })
}

// OAuthCode is a stored authorization code with its grant.
type OAuthCode struct {
	Grant         OAuthGrant
	RedirectURI   string
	CodeChallenge string
	ExpiresAt     time.Time
	UsedAt        *time.Time
}

// CodeForUpdate returns and locks the code whose hash is given, with its
// grant; ErrNotFound when there is none.
func (o *OAuthTx) CodeForUpdate(ctx context.Context, hash []byte) (OAuthCode, error) {
	var c OAuthCode
	g := &c.Grant
	err := o.tx.QueryRow(ctx, `
		SELECT c.grant_id::text, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at,
			g.client_id, g.user_id::text, g.scopes, g.resource, g.revoked_at
		FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id
		WHERE c.code_hash = $1 FOR UPDATE OF c, g`, hash).
		Scan(&g.ID, &c.RedirectURI, &c.CodeChallenge, &c.ExpiresAt, &c.UsedAt, &g.ClientID, &g.UserID, &g.Scopes, &g.Resource, &g.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return OAuthCode{}, notFound("authorization code not found")
	}
	if err != nil {
		return OAuthCode{}, fmt.Errorf("look up code: %w", err)
	}
	return c, nil
}

// MarkCodeUsed spends a code.
func (o *OAuthTx) MarkCodeUsed(ctx context.Context, hash []byte, now time.Time) error {
	if _, err := o.tx.Exec(ctx, `UPDATE oauth_codes SET used_at = $2 WHERE code_hash = $1`, hash, now); err != nil {
		return fmt.Errorf("mark code used: %w", err)
	}
	return nil
}

// OAuthRefreshToken is a stored refresh token with its grant.
type OAuthRefreshToken struct {
	ID        string
	Grant     OAuthGrant
	Scopes    []string
	ExpiresAt time.Time
	UsedAt    *time.Time
	RevokedAt *time.Time
}

// RefreshTokenForUpdate returns and locks the refresh token whose hash is
// given, with its grant; ErrNotFound when there is none.
func (o *OAuthTx) RefreshTokenForUpdate(ctx context.Context, hash []byte) (OAuthRefreshToken, error) {
	var t OAuthRefreshToken
	g := &t.Grant
	err := o.tx.QueryRow(ctx, `
		SELECT t.id::text, t.grant_id::text, t.scopes, t.expires_at, t.used_at, t.revoked_at,
			g.client_id, g.user_id::text, g.scopes, g.resource, g.revoked_at
		FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE t.token_hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t, g`, hash).
		Scan(&t.ID, &g.ID, &t.Scopes, &t.ExpiresAt, &t.UsedAt, &t.RevokedAt, &g.ClientID, &g.UserID, &g.Scopes, &g.Resource, &g.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return OAuthRefreshToken{}, notFound("refresh token not found")
	}
	if err != nil {
		return OAuthRefreshToken{}, fmt.Errorf("look up refresh token: %w", err)
	}
	return t, nil
}

// SpendRefreshToken marks a refresh token used (rotation).
func (o *OAuthTx) SpendRefreshToken(ctx context.Context, id string, now time.Time) error {
	if _, err := o.tx.Exec(ctx, `UPDATE oauth_tokens SET used_at = $2 WHERE id = $1`, id, now); err != nil {
		return fmt.Errorf("spend refresh token: %w", err)
	}
	return nil
}

// OAuth token kinds.
const (
	OAuthAccess  = "access"
	OAuthRefresh = "refresh"
)

// InsertOAuthToken stores a token of kind (OAuthAccess, OAuthRefresh) of
// the grant.
func (o *OAuthTx) InsertOAuthToken(ctx context.Context, grantID, kind string, hash []byte, scopes []string, expires time.Time) error {
	if _, err := o.tx.Exec(ctx, `INSERT INTO oauth_tokens (grant_id, kind, token_hash, scopes, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		grantID, kind, hash, nonNil(scopes), expires); err != nil {
		return fmt.Errorf("store %s token: %w", kind, err)
	}
	return nil
}

// PruneOAuthTokens deletes up to 100 tokens that expired before before:
// each issue prunes a bounded batch, so the table stays the size of what
// is live without a sweeper.
func (o *OAuthTx) PruneOAuthTokens(ctx context.Context, before time.Time) error {
	if _, err := o.tx.Exec(ctx, `DELETE FROM oauth_tokens WHERE id IN (
			SELECT id FROM oauth_tokens WHERE expires_at < $1 LIMIT 100)`, before); err != nil {
		return fmt.Errorf("prune expired tokens: %w", err)
	}
	return nil
}

// RevokeGrant revokes a grant and every token of it, for reason.
func (o *OAuthTx) RevokeGrant(ctx context.Context, grantID, reason string) error {
	return revokeGrantsWhere(ctx, o.tx, `id = $1`, reason, grantID)
}
