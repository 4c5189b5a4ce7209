package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Token is a stored API/session token. The clear token is never stored;
// Prefix is its first characters, for display.
type Token struct {
	ID         string
	UserID     string
	Name       string
	Prefix     string
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// NewToken describes a token to store. Hash is the SHA-256 of the clear
// token; ExpiresAt nil means it does not expire.
type NewToken struct {
	UserID    string
	Name      string
	Prefix    string
	Hash      []byte
	Scopes    []string
	ExpiresAt *time.Time
	// MintedWith is the id of the credential the token is minted with:
	// one of the user's session tokens or one of their OAuth access
	// tokens, which becomes its parent (revoking the parent revokes it).
	// Any other id (an external issuer's token, "" for the operator or
	// the console) links it to nothing.
	MintedWith string
}

const tokenColumns = `t.id::text, t.user_id::text, t.name, t.token_prefix, t.scopes, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func scanToken(row pgx.Row, extra ...any) (Token, error) {
	var t Token
	dest := append([]any{&t.ID, &t.UserID, &t.Name, &t.Prefix, &t.Scopes, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt}, extra...)
	return t, row.Scan(dest...)
}

// CreateToken stores a token for an existing user, linked to the
// credential it is minted with (NewToken.MintedWith). A parent that is
// revoked by now mints nothing: ErrTokenRevoked.
func (s *Store) CreateToken(ctx context.Context, nt NewToken) (Token, error) {
	if !IsUUID(nt.UserID) {
		return Token{}, notFound("create token: user %q not found", nt.UserID)
	}
	var t Token
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		parentToken, parentOAuth, err := lockParent(ctx, tx, nt.UserID, nt.MintedWith)
		if err != nil {
			return err
		}
		t, err = scanToken(tx.QueryRow(ctx, `
			INSERT INTO session_tokens AS t (user_id, name, token_prefix, token_hash, scopes, expires_at, parent_token_id, parent_oauth_token_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			RETURNING `+tokenColumns,
			nt.UserID, nt.Name, nt.Prefix, nt.Hash, nonNil(nt.Scopes), nt.ExpiresAt, parentToken, parentOAuth))
		return err
	})
	if err != nil {
		return Token{}, fmt.Errorf("create token: %w", mapError(err))
	}
	return t, nil
}

// lockParent finds the credential a token is minted with among the
// user's session tokens and OAuth access tokens, and holds it (FOR SHARE)
// until the new token is stored, so that a revocation of the parent
// either comes first (and nothing is minted) or waits and then finds the
// child. Both results are nil for a credential that is neither.
func lockParent(ctx context.Context, tx pgx.Tx, userID, id string) (parentToken, parentOAuth *string, err error) {
	if !IsUUID(id) {
		return nil, nil, nil
	}
	var revoked bool
	err = tx.QueryRow(ctx, `
		SELECT revoked_at IS NOT NULL FROM session_tokens WHERE id = $1 AND user_id = $2 FOR SHARE`, id, userID).Scan(&revoked)
	if err == nil {
		if revoked {
			return nil, nil, newError(ErrTokenRevoked, "the token minting it is revoked")
		}
		return &id, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, err
	}
	err = tx.QueryRow(ctx, `
		SELECT t.revoked_at IS NOT NULL OR g.revoked_at IS NOT NULL
		FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE t.id = $1 AND t.kind = 'access' AND g.user_id = $2
		FOR SHARE OF t, g`, id, userID).Scan(&revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case revoked:
		return nil, nil, newError(ErrTokenRevoked, "the access token minting it is revoked")
	}
	return nil, &id, nil
}

// TokenByHash returns the token whose SHA-256 is hash, with its user. A
// token that exists but may not be used is answered with ErrTokenRevoked,
// ErrTokenExpired (expires_at at or before now) or ErrUserDisabled, in
// that order of precedence; all three also match ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, hash []byte, now time.Time) (Token, User, error) {
	var (
		stored []byte
		u      User
		// A revocation reaches what the parent minted (revokeMinted); the
		// parent is checked here too, so a token minted while its parent
		// was being revoked is refused all the same.
		parentRevoked bool
	)
	t, err := scanToken(s.Pool.QueryRow(ctx, `
		SELECT `+tokenColumns+`, t.token_hash,
			u.id::text, u.username, u.email, u.display_name, u.groups, u.created_at, u.disabled_at IS NOT NULL,
			coalesce(p.revoked_at IS NOT NULL, false) OR coalesce(o.revoked_at IS NOT NULL OR g.revoked_at IS NOT NULL, false)
		FROM session_tokens t JOIN users u ON u.id = t.user_id
			LEFT JOIN session_tokens p ON p.id = t.parent_token_id
			LEFT JOIN oauth_tokens o ON o.id = t.parent_oauth_token_id
			LEFT JOIN oauth_grants g ON g.id = o.grant_id
		WHERE t.token_hash = $1`, hash),
		&stored, &u.ID, &u.Username, &u.Email, &u.DisplayName, &u.Groups, &u.CreatedAt, &u.Disabled, &parentRevoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, User{}, notFound("token not found")
	}
	if err != nil {
		return Token{}, User{}, fmt.Errorf("look up token: %w", mapError(err))
	}
	// The index lookup already matched; comparing again in constant time
	// guards against a lookup that ever matched on less than the full hash.
	if subtle.ConstantTimeCompare(stored, hash) != 1 {
		return Token{}, User{}, notFound("token not found")
	}
	switch {
	case t.RevokedAt != nil:
		return Token{}, User{}, newError(ErrTokenRevoked, "token %s… revoked", t.Prefix)
	case parentRevoked:
		return Token{}, User{}, newError(ErrTokenRevoked, "token %s… revoked: the credential it was minted with is", t.Prefix)
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		return Token{}, User{}, newError(ErrTokenExpired, "token %s… expired at %s", t.Prefix, t.ExpiresAt.UTC().Format(time.RFC3339))
	case u.Disabled:
		return Token{}, User{}, newError(ErrUserDisabled, "user %q is disabled", u.Username)
	}
	return t, u, nil
}

// TouchToken records that the token was used at now. To avoid a write per
// request it only writes when the stored last use is older than
// minInterval; it never moves last_used_at backwards.
func (s *Store) TouchToken(ctx context.Context, id string, now time.Time, minInterval time.Duration) error {
	if !IsUUID(id) {
		return notFound("token %q not found", id)
	}
	var exists bool
	err := s.Pool.QueryRow(ctx, `
		WITH touched AS (
			UPDATE session_tokens SET last_used_at = $2
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)
			RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM touched) OR EXISTS (SELECT 1 FROM session_tokens WHERE id = $1)`,
		id, now, now.Add(-minInterval)).Scan(&exists)
	if err != nil {
		return fmt.Errorf("touch token %s: %w", id, mapError(err))
	}
	if !exists {
		return notFound("token %s not found", id)
	}
	return nil
}

// OwnedToken is a token with its user's name.
type OwnedToken struct {
	Token
	Username string
}

// ListTokens returns the tokens of a user, or of everyone when userID is
// "", newest first. Revoked and expired tokens are included.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]Token, error) {
	owned, err := s.ListTokensWithUsers(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]Token, len(owned))
	for i, o := range owned {
		out[i] = o.Token
	}
	return out, nil
}

// ListTokensWithUsers is ListTokens with each token's username.
func (s *Store) ListTokensWithUsers(ctx context.Context, userID string) ([]OwnedToken, error) {
	if userID != "" && !IsUUID(userID) {
		return []OwnedToken{}, nil
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT `+tokenColumns+`, u.username FROM session_tokens t JOIN users u ON u.id = t.user_id
		WHERE $1::uuid IS NULL OR t.user_id = $1
		ORDER BY t.created_at DESC, t.id`, nullUUID(userID))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapError(err))
	}
	tokens, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OwnedToken, error) {
		var o OwnedToken
		t, err := scanToken(r, &o.Username)
		o.Token = t
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapError(err))
	}
	return tokens, nil
}

// RevokeToken revokes a token. With userID set, only that user's token is
// revoked: another user's token is answered as not found, so a caller
// cannot learn which ids exist. Revoking twice keeps the first revocation
// time.
func (s *Store) RevokeToken(ctx context.Context, id string, userID string) error {
	_, _, err := s.RevokeTokenOf(ctx, id, userID)
	return err
}

// RevokeTokenOf is RevokeToken answering the token as it is now and its
// user's name. Every token minted with it, at any depth, is revoked too.
func (s *Store) RevokeTokenOf(ctx context.Context, id string, userID string) (Token, string, error) {
	if !IsUUID(id) || (userID != "" && !IsUUID(userID)) {
		return Token{}, "", notFound("token %q not found", id)
	}
	var (
		username string
		t        Token
	)
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRow(ctx, `
			WITH revoked AS (
				UPDATE session_tokens SET revoked_at = coalesce(revoked_at, now())
				WHERE id = $1 AND ($2::uuid IS NULL OR user_id = $2)
				RETURNING *
			)
			SELECT `+tokenColumns+`, u.username FROM revoked t JOIN users u ON u.id = t.user_id`,
			id, nullUUID(userID)), &username)
		if err != nil {
			return err
		}
		return revokeMinted(ctx, tx, `parent_token_id = $1`, id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, "", notFound("token %s not found", id)
	}
	if err != nil {
		return Token{}, "", fmt.Errorf("revoke token %s: %w", id, mapError(err))
	}
	return t, username, nil
}

// revokeMinted revokes the session tokens matching cond (a WHERE clause
// over session_tokens with args, never caller input) and every token
// minted with them, at any depth. Parents are made before their children,
// so the tree has no cycle; UNION stops at tokens already reached.
func revokeMinted(ctx context.Context, tx pgx.Tx, cond string, args ...any) error {
	_, err := tx.Exec(ctx, `
		WITH RECURSIVE minted AS (
			SELECT id FROM session_tokens WHERE `+cond+`
			UNION
			SELECT c.id FROM session_tokens c JOIN minted m ON c.parent_token_id = m.id
		)
		UPDATE session_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id IN (SELECT id FROM minted)`, args...)
	if err != nil {
		return fmt.Errorf("revoke the tokens minted with it: %w", err)
	}
	return nil
}
