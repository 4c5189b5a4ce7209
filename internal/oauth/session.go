package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/websession"
)

// loginRequestTTL bounds how long a login may take.
const loginRequestTTL = 10 * time.Minute

// browserSession is the logged-in user of a browser.
type browserSession struct {
	UserID   string
	Username string
	// cookie is the clear session token, to derive the CSRF token from.
	cookie string
}

// formTTL is how long a page's form stays good to send.
const formTTL = time.Hour

// CSRF purposes: which form a token is for, so that the token of one
// form never passes for another.
const (
	csrfConsent = "consent"
	csrfAccount = "account" // the authorized apps page: revoke, sign out
	csrfLogin   = "login"
)

// csrf returns a CSRF token of the session for purpose and binding: keyed
// by the cookie, so it needs no storage and cannot be made without it.
func (s *Server) csrf(b *browserSession, purpose string, binding ...string) string {
	return websession.NewCSRF(b.cookie, purpose, s.now().Add(formTTL), binding...)
}

// sessionCookieName is __Host- prefixed over https, which pins the cookie
// to this host and path "/".
func (s *Server) sessionCookieName() string {
	if s.secure {
		return "__Host-berth_session"
	}
	return "berth_session"
}

func (s *Server) loginCookieName() string {
	if s.secure {
		return "__Host-berth_login"
	}
	return "berth_login"
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	c := &http.Cookie{
		Name: name, Value: value, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge.Seconds()),
	}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// session returns the browser's session, or nil when it has none that is
// valid.
func (s *Server) session(r *http.Request) (*browserSession, error) {
	c, err := r.Cookie(s.sessionCookieName())
	if err != nil || !hasShape(c.Value, sessionPrefix) {
		return nil, nil
	}
	b := &browserSession{cookie: c.Value}
	err = s.opts.Store.Pool.QueryRow(r.Context(), `
		SELECT u.id::text, u.username FROM oauth_browser_sessions bs JOIN users u ON u.id = bs.user_id
		WHERE bs.token_hash = $1 AND bs.expires_at > $2 AND u.disabled_at IS NULL`,
		hashSecret(c.Value), s.now()).Scan(&b.UserID, &b.Username)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up browser session: %w", err)
	}
	return b, nil
}

// startSession creates a session for user, sets its cookie and returns
// the cookie's value.
func (s *Server) startSession(ctx context.Context, w http.ResponseWriter, userID string) (string, error) {
	tok, hash, err := newSecret(sessionPrefix)
	if err != nil {
		return "", err
	}
	now := s.now()
	err = s.opts.Store.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_browser_sessions WHERE expires_at < $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_browser_sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			hash, userID, now.Add(s.opts.SessionTTL))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("create browser session: %w", err)
	}
	s.setCookie(w, s.sessionCookieName(), tok, s.opts.SessionTTL)
	return tok, nil
}

// endSession deletes the browser's session.
func (s *Server) endSession(ctx context.Context, w http.ResponseWriter, b *browserSession) error {
	s.setCookie(w, s.sessionCookieName(), "", -1)
	return s.dropSession(ctx, b)
}

// dropSession deletes a session, leaving its cookie alone.
func (s *Server) dropSession(ctx context.Context, b *browserSession) error {
	if _, err := s.opts.Store.Pool.Exec(ctx, `DELETE FROM oauth_browser_sessions WHERE token_hash = $1`, hashSecret(b.cookie)); err != nil {
		return fmt.Errorf("end browser session: %w", err)
	}
	return nil
}

// newLoginRequest remembers where to resume after login and returns the
// handle the login carries.
func (s *Server) newLoginRequest(ctx context.Context, returnTo string) (string, error) {
	handle, hash, err := newSecret(loginPrefix)
	if err != nil {
		return "", err
	}
	now := s.now()
	err = s.opts.Store.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_login_requests WHERE expires_at < $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_login_requests (handle_hash, return_to, expires_at) VALUES ($1, $2, $3)`,
			hash, returnTo, now.Add(loginRequestTTL))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store login request: %w", err)
	}
	return handle, nil
}

// loginRequestValid reports whether handle names a pending login.
func (s *Server) loginRequestValid(ctx context.Context, handle string) (bool, error) {
	if !hasShape(handle, loginPrefix) {
		return false, nil
	}
	var ok bool
	err := s.opts.Store.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_login_requests WHERE handle_hash = $1 AND expires_at > $2)`,
		hashSecret(handle), s.now()).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up login request: %w", err)
	}
	return ok, nil
}

// takeLoginRequest consumes a pending login and returns where to resume;
// "" when the handle is unknown, used or expired.
func (s *Server) takeLoginRequest(ctx context.Context, handle string) (string, error) {
	if !hasShape(handle, loginPrefix) {
		return "", nil
	}
	var returnTo string
	err := s.opts.Store.Pool.QueryRow(ctx, `DELETE FROM oauth_login_requests WHERE handle_hash = $1 AND expires_at > $2 RETURNING return_to`,
		hashSecret(handle), s.now()).Scan(&returnTo)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("take login request: %w", err)
	}
	return returnTo, nil
}
