package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BrowserSession is the signed-in user of a browser session
// (internal/websession). The session's token is stored as its hash only.
type BrowserSession struct {
	UserID   string
	Username string
}

// CreateBrowserSession stores a session of user until expires, and drops
// the sessions that expired before now, so the table holds only live ones
// without a sweeper.
func (s *Store) CreateBrowserSession(ctx context.Context, tokenHash []byte, userID string, now, expires time.Time) error {
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_browser_sessions WHERE expires_at < $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_browser_sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
			tokenHash, userID, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("create browser session: %w", mapError(err))
	}
	return nil
}

// BrowserSessionByHash returns the user of the session whose token hashes
// to tokenHash; ErrNotFound when it is unknown, expired at now, or its
// user is disabled.
func (s *Store) BrowserSessionByHash(ctx context.Context, tokenHash []byte, now time.Time) (BrowserSession, error) {
	var b BrowserSession
	err := s.Pool.QueryRow(ctx, `
		SELECT u.id::text, u.username FROM oauth_browser_sessions bs JOIN users u ON u.id = bs.user_id
		WHERE bs.token_hash = $1 AND bs.expires_at > $2 AND u.disabled_at IS NULL`,
		tokenHash, now).Scan(&b.UserID, &b.Username)
	if errors.Is(err, pgx.ErrNoRows) {
		return BrowserSession{}, notFound("browser session not found")
	}
	if err != nil {
		return BrowserSession{}, fmt.Errorf("look up browser session: %w", mapError(err))
	}
	return b, nil
}

// DeleteBrowserSession ends a session; an unknown one is not an error.
func (s *Store) DeleteBrowserSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.Pool.Exec(ctx, `DELETE FROM oauth_browser_sessions WHERE token_hash = $1`, tokenHash); err != nil {
		return fmt.Errorf("end browser session: %w", mapError(err))
	}
	return nil
}

// CreateLoginRequest stores a pending login: where to resume (returnTo)
// once the user has signed in, until expires. Expired ones are dropped on
// the way.
func (s *Store) CreateLoginRequest(ctx context.Context, handleHash []byte, returnTo string, now, expires time.Time) error {
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_login_requests WHERE expires_at < $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_login_requests (handle_hash, return_to, expires_at) VALUES ($1, $2, $3)`,
			handleHash, returnTo, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("store login request: %w", mapError(err))
	}
	return nil
}

// LoginRequestPending reports whether a login request is stored and not
// expired at now.
func (s *Store) LoginRequestPending(ctx context.Context, handleHash []byte, now time.Time) (bool, error) {
	var ok bool
	err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_login_requests WHERE handle_hash = $1 AND expires_at > $2)`,
		handleHash, now).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up login request: %w", mapError(err))
	}
	return ok, nil
}

// TakeLoginRequest consumes a pending login and returns where it resumes;
// ErrNotFound when it is unknown, used or expired at now.
func (s *Store) TakeLoginRequest(ctx context.Context, handleHash []byte, now time.Time) (string, error) {
	var returnTo string
	err := s.Pool.QueryRow(ctx, `DELETE FROM oauth_login_requests WHERE handle_hash = $1 AND expires_at > $2 RETURNING return_to`,
		handleHash, now).Scan(&returnTo)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFound("login request not found")
	}
	if err != nil {
		return "", fmt.Errorf("take login request: %w", mapError(err))
	}
	return returnTo, nil
}
