package oauth

import (
	"context"

	"github.com/berth-mcp/berth/internal/store"
)

// exchanged is what one exchange at the token endpoint settled inside its
// transaction: the tokens issued, or the refusal for the client. replayed
// is set when the presented code or refresh token had been spent before;
// the exchange has then revoked the grant of grantID, owned by userID.
type exchanged struct {
	resp            tokenResponse
	refusal         *oauthError
	replayed        bool
	grantID, userID string
}

// refuse ends an exchange with an OAuth error for the client. The
// transaction still commits: a refusal is an answer, not a failure.
func refuse(oe *oauthError) (exchanged, error) { return exchanged{refusal: oe}, nil }

// replayed revokes the grant whose spent secret came back and refuses the
// exchange with oe: a replay means the secret may have leaked, so nothing
// issued from it can be trusted (RFC 9700 4.5, 4.14.2).
func replayed(ctx context.Context, tx *store.OAuthTx, grantID, userID, reason string, oe *oauthError) (exchanged, error) {
	x := exchanged{refusal: oe, replayed: true, grantID: grantID, userID: userID}
	return x, tx.RevokeGrant(ctx, grantID, reason)
}

// redeem runs one exchange in a transaction; a retried transaction runs
// it again from the start. A replay is logged as logMsg and audited as
// auditAction only once the revocation has committed, and cached tokens
// are dropped so the revoked ones stop working at once.
func (s *Server) redeem(ctx context.Context, c *client, logMsg, auditAction string, exchange func(*store.OAuthTx) (exchanged, error)) (tokenResponse, error) {
	var x exchanged
	err := s.opts.Store.InOAuthTx(ctx, func(tx *store.OAuthTx) error {
		var err error
		x, err = exchange(tx)
		return err
	})
	if err != nil {
		return tokenResponse{}, err
	}
	if x.replayed {
		s.forgetCredentials()
		s.log.Warn(logMsg, "client_id", c.ID, "grant_id", x.grantID)
		s.audit(ctx, x.userID, "", auditAction, c.ID, "denied", map[string]any{"grant_id": x.grantID})
	}
	if x.refusal != nil {
		return tokenResponse{}, x.refusal
	}
	return x.resp, nil
}

// sameResource checks the resource parameter of a token request (RFC
// 8707 2.2): optional there, but when sent it must name the resource the
// grant was authorized for.
func (s *Server) sameResource(requested, authorized string) *oauthError {
	if requested == "" {
		return nil
	}
	n, oe := s.checkResource(requested, false)
	if oe != nil {
		return oe
	}
	if n != authorized {
		return oerr(errInvalidTarget, "resource %q differs from the one authorized (%s)", requested, authorized)
	}
	return nil
}
