package oauth

import (
	"context"
	"errors"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
)

// loginRequestTTL bounds how long a login may take.
const loginRequestTTL = 10 * time.Minute

// loginCookie holds the sign-in form's CSRF key (websession.FormKey).
const loginCookie = "berth_login"

// CSRF purposes: which form a token is for, so that the token of one
// form never passes for another.
const (
	csrfConsent = "consent"
	csrfAccount = "account" // the authorized apps page: revoke, sign out
	csrfLogin   = "login"
)

// browserSession is the signed-in user of a browser.
type browserSession = websession.Session

// newLoginRequest remembers where to resume after login and returns the
// handle the login carries.
func (s *Server) newLoginRequest(ctx context.Context, returnTo string) (string, error) {
	handle, hash, err := newSecret(loginPrefix)
	if err != nil {
		return "", err
	}
	now := s.now()
	if err := s.opts.Store.CreateLoginRequest(ctx, hash, returnTo, now, now.Add(loginRequestTTL)); err != nil {
		return "", err
	}
	return handle, nil
}

// loginRequestValid reports whether handle names a pending login.
func (s *Server) loginRequestValid(ctx context.Context, handle string) (bool, error) {
	if !hasShape(handle, loginPrefix) {
		return false, nil
	}
	return s.opts.Store.LoginRequestPending(ctx, hashSecret(handle), s.now())
}

// takeLoginRequest consumes a pending login and returns where to resume;
// "" when the handle is unknown, used or expired.
func (s *Server) takeLoginRequest(ctx context.Context, handle string) (string, error) {
	if !hasShape(handle, loginPrefix) {
		return "", nil
	}
	returnTo, err := s.opts.Store.TakeLoginRequest(ctx, hashSecret(handle), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return returnTo, err
}
