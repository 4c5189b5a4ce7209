package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-mcp/berth/internal/store"
)

// registeredClient is a client row with its registration token hash.
type registeredClient struct {
	client
	RegTokenHash []byte
	IssuedAt     time.Time
}

// clientRow is c as the store keeps it.
func clientRow(c *client, regHash []byte) (store.OAuthClient, error) {
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("encode client metadata: %w", err)
	}
	return store.OAuthClient{
		ClientID: c.ID, SecretHash: c.SecretHash, RegistrationTokenHash: regHash, AuthMethod: c.Meta.TokenEndpointAuthMethod,
		ClientName: c.Meta.ClientName, RedirectURIs: c.Meta.RedirectURIs, GrantTypes: c.Meta.GrantTypes, Metadata: meta,
	}, nil
}

func (s *Server) insertClient(ctx context.Context, c *client, regHash []byte) error {
	row, err := clientRow(c, regHash)
	if err != nil {
		return err
	}
	return s.opts.Store.CreateOAuthClient(ctx, row)
}

func (s *Server) updateClient(ctx context.Context, c *client) error {
	row, err := clientRow(c, nil)
	if err != nil {
		return err
	}
	return s.opts.Store.UpdateOAuthClient(ctx, row)
}

// registeredClientByID returns a registered client, or an error matching
// store.ErrNotFound.
func (s *Server) registeredClientByID(ctx context.Context, id string) (*registeredClient, error) {
	row, err := s.opts.Store.OAuthClientByID(ctx, id)
	if err != nil {
		return nil, err
	}
	rc := registeredClient{client: client{ID: row.ClientID, SecretHash: row.SecretHash}, RegTokenHash: row.RegistrationTokenHash, IssuedAt: row.CreatedAt}
	if err := json.Unmarshal(row.Metadata, &rc.Meta); err != nil {
		return nil, fmt.Errorf("client %s: stored metadata: %w", id, err)
	}
	rc.Meta.ClientID = ""
	return &rc, nil
}

// deleteClient removes a registered client, its consents, and revokes
// every grant it holds.
func (s *Server) deleteClient(ctx context.Context, id string) error {
	defer s.forgetCredentials()
	return s.opts.Store.DeleteOAuthClient(ctx, id)
}
