package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// parseTokenForm reads the urlencoded body of a token or revocation
// request. Parameters in the URL are ignored; a repeated parameter is an
// error (RFC 6749 3.2).
func parseTokenForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	ct := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]))
	if ct != "application/x-www-form-urlencoded" {
		return nil, oerr(errInvalidRequest, "the request body must be application/x-www-form-urlencoded, got %q", ct)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &oauthError{Code: errInvalidRequest, Description: "the request body is larger than 64 KiB", Status: http.StatusRequestEntityTooLarge}
		}
		return nil, oerr(errInvalidRequest, "the request body is not a valid form: %v", err)
	}
	for name, v := range r.PostForm {
		if len(v) > 1 {
			return nil, oerr(errInvalidRequest, "parameter %s is repeated", name)
		}
	}
	return r.PostForm, nil
}

// authenticateClient identifies the client of a token or revocation
// request: by client_id alone for public clients, with its secret by the
// method it registered for confidential ones.
func (s *Server) authenticateClient(ctx context.Context, r *http.Request, form url.Values) (*client, error) {
	basicID, basicSecret, hasBasic := r.BasicAuth()
	unauthorized := func(format string, args ...any) *oauthError {
		oe := oerr(errInvalidClient, format, args...)
		oe.Status = http.StatusUnauthorized
		return oe
	}
	if hasBasic {
		// RFC 6749 2.3.1: both parts are form-encoded before base64.
		var err1, err2 error
		basicID, err1 = url.QueryUnescape(basicID)
		basicSecret, err2 = url.QueryUnescape(basicSecret)
		if err1 != nil || err2 != nil {
			return nil, unauthorized("the Basic credentials are not form-encoded correctly")
		}
	} else if h := r.Header.Get("Authorization"); h != "" {
		return nil, unauthorized("unsupported Authorization scheme at this endpoint; use Basic client credentials or none")
	}
	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if hasBasic && formSecret != "" {
		return nil, oerr(errInvalidRequest, "the client authenticated with both client_secret_basic and client_secret_post; use one")
	}
	id := formID
	if hasBasic {
		if formID != "" && formID != basicID {
			return nil, oerr(errInvalidRequest, "client_id in the body differs from the one in the Authorization header")
		}
		id = basicID
	}
	if id == "" {
		return nil, unauthorized("client_id is missing")
	}
	c, err := s.lookupClient(ctx, id)
	if err != nil {
		var oe *oauthError
		if errors.As(err, &oe) {
			if oe.Status == http.StatusTooManyRequests {
				return nil, oe
			}
			return nil, unauthorized("%s", oe.Description)
		}
		return nil, err
	}
	method := c.Meta.TokenEndpointAuthMethod
	switch {
	case method == authNone:
		if hasBasic || formSecret != "" {
			return nil, unauthorized("client %s is a public client and must not send a client secret", c.name())
		}
		return c, nil
	case method == authBasic && !hasBasic:
		return nil, unauthorized("client %s must authenticate with client_secret_basic (HTTP Basic)", c.name())
	case method == authPost && (hasBasic || formSecret == ""):
		return nil, unauthorized("client %s must authenticate with client_secret_post (client_secret in the body)", c.name())
	}
	secret := formSecret
	if hasBasic {
		secret = basicSecret
	}
	if c.SecretHash == nil || subtle.ConstantTimeCompare(hashSecret(secret), c.SecretHash) != 1 {
		return nil, unauthorized("client authentication failed")
	}
	return c, nil
}
