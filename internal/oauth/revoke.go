package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// revoke is POST /oauth/revoke (RFC 7009). Revoking a refresh token
// revokes its whole grant; revoking an access token revokes that token.
// Unknown tokens and tokens of other clients are answered 200 like known
// ones, so the endpoint tells nothing about which tokens exist.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
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
	tok := form.Get("token")
	if tok == "" {
		writeOAuthError(w, oerr(errInvalidRequest, "token is missing"))
		return
	}
	if hasShape(tok, AccessTokenPrefix) || hasShape(tok, RefreshTokenPrefix) {
		if err := s.revokeToken(r.Context(), c.ID, tok); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

func (s *Server) revokeToken(ctx context.Context, clientID, tok string) error {
	defer s.cache.Forget()
	return s.opts.Store.InTx(ctx, func(tx pgx.Tx) error {
		var id, kind, grantID, owner string
		err := tx.QueryRow(ctx, `
			SELECT t.id::text, t.kind, t.grant_id::text, g.client_id FROM oauth_tokens t
			JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1`, hashSecret(tok)).
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
		return nil
	})
}
