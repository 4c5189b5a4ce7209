package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// errNoRow is returned by lookups that found nothing.
var errNoRow = errors.New("no such row")

type dbQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// registeredClient is a client row with its registration token hash.
type registeredClient struct {
	client
	RegTokenHash []byte
	IssuedAt     time.Time
}

func (s *Server) insertClient(ctx context.Context, c *client, regHash []byte) error {
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return fmt.Errorf("encode client metadata: %w", err)
	}
	_, err = s.opts.Store.Pool.Exec(ctx, `
		INSERT INTO oauth_clients (client_id, secret_hash, registration_token_hash, token_endpoint_auth_method,
			client_name, redirect_uris, grant_types, metadata)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.ID, c.SecretHash, regHash, c.Meta.TokenEndpointAuthMethod, c.Meta.ClientName, c.Meta.RedirectURIs, c.Meta.GrantTypes, meta)
	if err != nil {
		return fmt.Errorf("store client %s: %w", c.ID, err)
	}
	return nil
}

func (s *Server) updateClient(ctx context.Context, c *client) error {
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return fmt.Errorf("encode client metadata: %w", err)
	}
	_, err = s.opts.Store.Pool.Exec(ctx, `
		UPDATE oauth_clients SET token_endpoint_auth_method = $2, client_name = $3, redirect_uris = $4,
			grant_types = $5, metadata = $6, updated_at = now()
		WHERE client_id = $1`,
		c.ID, c.Meta.TokenEndpointAuthMethod, c.Meta.ClientName, c.Meta.RedirectURIs, c.Meta.GrantTypes, meta)
	if err != nil {
		return fmt.Errorf("update client %s: %w", c.ID, err)
	}
	return nil
}

// registeredClientByID returns a registered client, or errNoRow.
func (s *Server) registeredClientByID(ctx context.Context, id string) (*registeredClient, error) {
	var (
		rc   registeredClient
		meta []byte
	)
	err := s.opts.Store.Pool.QueryRow(ctx, `
		SELECT client_id, secret_hash, registration_token_hash, metadata, created_at FROM oauth_clients WHERE client_id = $1`, id).
		Scan(&rc.ID, &rc.SecretHash, &rc.RegTokenHash, &meta, &rc.IssuedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoRow
	}
	if err != nil {
		return nil, fmt.Errorf("look up client %s: %w", id, err)
	}
	if err := json.Unmarshal(meta, &rc.Meta); err != nil {
		return nil, fmt.Errorf("client %s: stored metadata: %w", id, err)
	}
	rc.Meta.ClientID = ""
	return &rc, nil
}

// deleteClient removes a registered client, its consents, and revokes
// every grant it holds, in one transaction.
func (s *Server) deleteClient(ctx context.Context, id string) error {
	defer s.cache.Forget()
	return s.opts.Store.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_clients WHERE client_id = $1`, id); err != nil {
			return fmt.Errorf("delete client %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_consents WHERE client_id = $1`, id); err != nil {
			return fmt.Errorf("delete consents of client %s: %w", id, err)
		}
		return revokeGrantsWhere(ctx, tx, `client_id = $1`, "client deleted", id)
	})
}

// revokeGrantsWhere revokes the grants matching cond (a WHERE clause over
// oauth_grants with args) and every token of theirs.
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
	return nil
}
