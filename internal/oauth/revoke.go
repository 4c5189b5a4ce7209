package oauth

import (
	"context"
	"net/http"
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

// forgetCredentials drops every principal cached on this replica, the
// authorization server's and the session tokens', after a revocation.
func (s *Server) forgetCredentials() {
	s.cache.Forget()
	s.opts.Users.ForgetCredentials()
}

func (s *Server) revokeToken(ctx context.Context, clientID, tok string) error {
	defer s.forgetCredentials()
	return s.opts.Store.RevokeOAuthToken(ctx, hashSecret(tok), clientID)
}
