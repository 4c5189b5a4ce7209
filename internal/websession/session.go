package websession

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/store"
)

// Prefixes of the cookies' random values, so a leaked one says what it
// is and one kind is never taken for another.
const (
	tokenPrefix   = "berth_bs_"
	formKeyPrefix = "berth_lc_"
)

const tokenRandomBytes = 32

// Options configure Sessions.
type Options struct {
	Store *store.Store
	// Secure: the site is served over https. Cookies are then Secure and
	// __Host- prefixed, which pins them to this host and path "/".
	Secure bool
	// CookieName is the session cookie's name without the __Host- prefix;
	// default "berth_session".
	CookieName string
	// TTL is how long a session lasts; default 12 h.
	TTL time.Duration
	// FormTTL is how long a form's CSRF token stays good; default 1 h.
	FormTTL time.Duration
	// Origin is the site's public origin (scheme://host[:port]); forms
	// posted from it pass CheckOrigin even when a reverse proxy changed
	// the Host header. "" trusts only the request's own host.
	Origin string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Sessions are the browser sessions of a site: a random token in an
// HttpOnly, SameSite=Lax cookie, stored in PostgreSQL as its SHA-256
// only, so every replica knows every session and a database leak yields
// no usable cookie.
type Sessions struct {
	opts    Options
	origins *http.CrossOriginProtection
}

// Session is a signed-in browser.
type Session struct {
	UserID   string
	Username string
	// token is the clear cookie value: the key of the session's CSRF
	// tokens and MACs. It never leaves the package.
	token string
}

// New returns the sessions of a site.
func New(opts Options) (*Sessions, error) {
	if opts.Store == nil {
		return nil, errors.New("websession: Store is required")
	}
	if opts.CookieName == "" {
		opts.CookieName = "berth_session"
	}
	if opts.TTL <= 0 {
		opts.TTL = 12 * time.Hour
	}
	if opts.FormTTL <= 0 {
		opts.FormTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	origins := http.NewCrossOriginProtection()
	if opts.Origin != "" {
		if err := origins.AddTrustedOrigin(opts.Origin); err != nil {
			return nil, fmt.Errorf("websession: Origin: %w", err)
		}
	}
	return &Sessions{opts: opts, origins: origins}, nil
}

// CookieName returns the name a cookie called base gets on this site:
// __Host- prefixed over https.
func (m *Sessions) CookieName(base string) string {
	if m.opts.Secure {
		return "__Host-" + base
	}
	return base
}

// SetCookie sets the site's cookie base (HttpOnly, SameSite=Lax, path
// "/", Secure over https) for maxAge; a negative maxAge deletes it.
func (m *Sessions) SetCookie(w http.ResponseWriter, base, value string, maxAge time.Duration) {
	c := &http.Cookie{
		Name: m.CookieName(base), Value: value, Path: "/", HttpOnly: true, Secure: m.opts.Secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge.Seconds()),
	}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// Get returns the browser's session, or nil when it has none that is
// valid (no cookie, a malformed, unknown or expired one, or a disabled
// user). Only a database failure is an error.
func (m *Sessions) Get(r *http.Request) (*Session, error) {
	c, err := r.Cookie(m.CookieName(m.opts.CookieName))
	if err != nil || !HasShape(c.Value, tokenPrefix) {
		return nil, nil
	}
	b, err := m.opts.Store.BrowserSessionByHash(r.Context(), hashToken(c.Value), m.opts.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Session{UserID: b.UserID, Username: b.Username, token: c.Value}, nil
}

// Start signs the browser in as user: a new session and its cookie. A
// caller replacing a session (a new login) should Drop the old one, so it
// does not stay usable.
func (m *Sessions) Start(ctx context.Context, w http.ResponseWriter, userID, username string) (*Session, error) {
	tok, err := RandomToken(tokenPrefix)
	if err != nil {
		return nil, err
	}
	now := m.opts.Now()
	if err := m.opts.Store.CreateBrowserSession(ctx, hashToken(tok), userID, now, now.Add(m.opts.TTL)); err != nil {
		return nil, err
	}
	m.SetCookie(w, m.opts.CookieName, tok, m.opts.TTL)
	return &Session{UserID: userID, Username: username, token: tok}, nil
}

// End signs the browser out: its session is deleted and its cookie
// cleared.
func (m *Sessions) End(ctx context.Context, w http.ResponseWriter, s *Session) error {
	m.SetCookie(w, m.opts.CookieName, "", -1)
	return m.Drop(ctx, s)
}

// Drop deletes a session, leaving the browser's cookie alone.
func (m *Sessions) Drop(ctx context.Context, s *Session) error {
	return m.opts.Store.DeleteBrowserSession(ctx, hashToken(s.token))
}

// CSRF returns the token a page puts in a form of purpose that answers
// the request identified by binding (none for a form that answers no
// particular request); see NewCSRF.
func (m *Sessions) CSRF(s *Session, purpose string, binding ...string) string {
	return NewCSRF(s.token, purpose, m.opts.Now().Add(m.opts.FormTTL), binding...)
}

// CheckCSRF checks a posted form's token against the session, purpose
// and binding; see CheckCSRF.
func (m *Sessions) CheckCSRF(s *Session, token, purpose string, binding ...string) error {
	return CheckCSRF(s.token, token, purpose, m.opts.Now(), binding...)
}

// MAC returns a MAC, keyed by the session, of purpose and fields: a
// marker only this browser's session can make and check (see MAC).
func (s *Session) MAC(purpose string, fields ...string) string {
	return MAC(s.token, purpose, fields...)
}

// RandomToken returns prefix + base64url of 32 random bytes.
func RandomToken(prefix string) (string, error) {
	b := make([]byte, tokenRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// hashToken is SHA-256: the token carries 256 random bits, so there is
// nothing to brute-force and no need for a slow hash.
func hashToken(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// HasShape reports whether s has exactly the shape of a RandomToken of
// prefix, so that junk and other kinds of credentials cost no database
// lookup.
func HasShape(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(tokenRandomBytes) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == tokenRandomBytes
}
