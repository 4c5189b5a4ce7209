package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OAuthClient is a client registered at berth's authorization server
// (Dynamic Client Registration). Metadata is its RFC 7591 metadata as
// JSON; the other fields repeat what the server looks up or lists by.
// Secrets are stored as hashes only.
type OAuthClient struct {
	ClientID              string
	SecretHash            []byte // nil for public clients
	RegistrationTokenHash []byte
	AuthMethod            string
	ClientName            string
	RedirectURIs          []string
	GrantTypes            []string
	Metadata              []byte
	CreatedAt             time.Time
}

// CreateOAuthClient stores a newly registered client.
func (s *Store) CreateOAuthClient(ctx context.Context, c OAuthClient) error {
	_, err := s.Pool.Exec(ctx, `
		INSERT INTO oauth_clients (client_id, secret_hash, registration_token_hash, token_endpoint_auth_method,
			client_name, redirect_uris, grant_types, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.ClientID, c.SecretHash, c.RegistrationTokenHash, c.AuthMethod, c.ClientName, nonNil(c.RedirectURIs), nonNil(c.GrantTypes), c.Metadata)
	if err != nil {
		return fmt.Errorf("store client %s: %w", c.ClientID, mapError(err))
	}
	return nil
}

// UpdateOAuthClient replaces a client's metadata (RFC 7592); its secrets
// stay.
func (s *Store) UpdateOAuthClient(ctx context.Context, c OAuthClient) error {
	_, err := s.Pool.Exec(ctx, `
		UPDATE oauth_clients SET token_endpoint_auth_method = $2, client_name = $3, redirect_uris = $4,
			grant_types = $5, metadata = $6, updated_at = now()
		WHERE client_id = $1`,
		c.ClientID, c.AuthMethod, c.ClientName, nonNil(c.RedirectURIs), nonNil(c.GrantTypes), c.Metadata)
	if err != nil {
		return fmt.Errorf("update client %s: %w", c.ClientID, mapError(err))
	}
	return nil
}

// OAuthClientByID returns a registered client; ErrNotFound when there is
// none.
func (s *Store) OAuthClientByID(ctx context.Context, id string) (OAuthClient, error) {
	c := OAuthClient{ClientID: id}
	err := s.Pool.QueryRow(ctx, `
		SELECT secret_hash, registration_token_hash, token_endpoint_auth_method, client_name, redirect_uris, grant_types,
			metadata, created_at
		FROM oauth_clients WHERE client_id = $1`, id).
		Scan(&c.SecretHash, &c.RegistrationTokenHash, &c.AuthMethod, &c.ClientName, &c.RedirectURIs, &c.GrantTypes, &c.Metadata, &c.CreatedAt)
	if err != nil {
		return OAuthClient{}, rowError(err, "client", id)
	}
	return c, nil
}

// DeleteOAuthClient removes a registered client and every user's consent
// to it, and revokes every grant it holds, in one transaction.
func (s *Store) DeleteOAuthClient(ctx context.Context, id string) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_clients WHERE client_id = $1`, id); err != nil {
			return fmt.Errorf("delete client %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_consents WHERE client_id = $1`, id); err != nil {
			return fmt.Errorf("delete consents of client %s: %w", id, err)
		}
		return revokeGrantsWhere(ctx, tx, `client_id = $1`, "client deleted", id)
	})
}

// OAuthConsent is what a user approved for a client.
type OAuthConsent struct {
	ClientID   string
	ClientName string
	Scopes     []string
	CreatedAt  time.Time
}

// ConsentScopes returns the scopes the user approved for the client, nil
// when they never did.
func (s *Store) ConsentScopes(ctx context.Context, userID, clientID string) ([]string, error) {
	var have []string
	err := s.Pool.QueryRow(ctx, `SELECT scopes FROM oauth_consents WHERE user_id = $1 AND client_id = $2`,
		userID, clientID).Scan(&have)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up consent: %w", mapError(err))
	}
	return have, nil
}

// SaveConsent records an approval, adding scopes to earlier ones.
func (s *Store) SaveConsent(ctx context.Context, userID, clientID, clientName string, scopes []string) error {
	_, err := s.Pool.Exec(ctx, `
		INSERT INTO oauth_consents (user_id, client_id, client_name, scopes) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, client_id) DO UPDATE SET client_name = excluded.client_name, updated_at = now(),
			scopes = ARRAY(SELECT DISTINCT unnest(oauth_consents.scopes || excluded.scopes) ORDER BY 1)`,
		userID, clientID, clientName, nonNil(scopes))
	if err != nil {
		return fmt.Errorf("save consent: %w", mapError(err))
	}
	return nil
}

// ListConsents returns the clients a user approved, most recent first (at
// most 500).
func (s *Store) ListConsents(ctx context.Context, userID string) ([]OAuthConsent, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT client_id, client_name, scopes, created_at FROM oauth_consents
		WHERE user_id = $1 ORDER BY updated_at DESC LIMIT 500`, userID)
	if err != nil {
		return nil, fmt.Errorf("list consents: %w", mapError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OAuthConsent, error) {
		var c OAuthConsent
		return c, row.Scan(&c.ClientID, &c.ClientName, &c.Scopes, &c.CreatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list consents: %w", mapError(err))
	}
	return out, nil
}

// RevokeConsent deletes the user's consent to the client and revokes
// every grant the client holds for the user.
func (s *Store) RevokeConsent(ctx context.Context, userID, clientID string) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_consents WHERE user_id = $1 AND client_id = $2`, userID, clientID); err != nil {
			return fmt.Errorf("delete consent: %w", err)
		}
		return revokeGrantsWhere(ctx, tx, `user_id = $1 AND client_id = $2`, "consent revoked by the user", userID, clientID)
	})
}

// revokeGrantsWhere revokes the grants matching cond (a WHERE clause over
// oauth_grants with args, never caller input) and every token of theirs.
func revokeGrantsWhere(ctx context.Context, tx pgx.Tx, cond, reason string, args ...any) error {
	n := len(args)
	_, err := tx.Exec(ctx, fmt.Sprintf(`
		WITH g AS (
			UPDATE oauth_grants SET revoked_at = coalesce(revoked_at, now()),
				revoke_reason = CASE WHEN revoked_at IS NULL THEN $%d ELSE revoke_reason END
			WHERE %s RETURNING id
		)
		UPDATE oauth_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE grant_id IN (SELECT id FROM g)`, n+1, cond),
		append(args, reason)...)
	if err != nil {
		return fmt.Errorf("revoke grants (%s): %w", reason, err)
	}
	// The session tokens minted with the grants' access tokens go too.
	err = revokeMinted(ctx, tx, fmt.Sprintf(`parent_oauth_token_id IN (
		SELECT id FROM oauth_tokens WHERE grant_id IN (SELECT id FROM oauth_grants WHERE %s))`, cond), args...)
	if err != nil {
		return fmt.Errorf("revoke grants (%s): %w", reason, err)
	}
	return nil
}
