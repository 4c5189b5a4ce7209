package oidclogin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/berth-mcp/berth/internal/wire"
)

// Login runs logins against one provider. It is safe for concurrent use
// and keeps no per-login state in memory: all of it is in the cookie.
type Login struct {
	cfg        Config
	provider   *oidc.Provider
	oauth      oauth2.Config
	strict     *oidc.IDTokenVerifier // decides
	sigOnly    *oidc.IDTokenVerifier // only explains why strict said no
	client     *http.Client
	seal       sealer
	cookiePath string
	secure     bool
	now        func() time.Time
}

// New discovers the provider at cfg.Issuer and returns a Login for it.
func New(ctx context.Context, cfg Config) (*Login, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover OpenID provider %s: %w", cfg.Issuer, err)
	}
	var meta struct {
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fmt.Errorf("read discovery document of %s: %w", cfg.Issuer, err)
	}
	endpoint := provider.Endpoint()
	if endpoint.AuthURL == "" || endpoint.TokenURL == "" {
		return nil, fmt.Errorf("OpenID provider %s: discovery document lacks authorization_endpoint or token_endpoint", cfg.Issuer)
	}
	endpoint.AuthStyle = authStyle(cfg.ClientSecret, meta.AuthMethods)
	seal, err := newSealer(cfg.Key)
	if err != nil {
		return nil, err
	}
	redirect, _ := url.Parse(cfg.RedirectURL) // checked by cfg.check
	l := &Login{
		cfg:      cfg,
		provider: provider,
		oauth: oauth2.Config{
			ClientID:     cfg.ClientID,
			ClientSecret: cfg.ClientSecret,
			Endpoint:     endpoint,
			RedirectURL:  cfg.RedirectURL,
			Scopes:       cfg.scopes(),
		},
		client:     client,
		seal:       seal,
		cookiePath: redirect.EscapedPath(),
		secure:     redirect.Scheme == "https",
		now:        time.Now,
	}
	if l.cookiePath == "" {
		l.cookiePath = "/"
	}
	now := func() time.Time { return l.now() }
	l.strict = provider.Verifier(&oidc.Config{ClientID: cfg.ClientID, Now: now})
	l.sigOnly = provider.Verifier(&oidc.Config{SkipClientIDCheck: true, SkipExpiryCheck: true, SkipIssuerCheck: true})
	return l, nil
}

// authStyle picks how the client secret is sent to the token endpoint.
// client_secret_post is preferred when offered: every major provider
// takes it, and it spares auto-detection's failed first request.
func authStyle(secret string, offered []string) oauth2.AuthStyle {
	switch {
	case secret == "" || slices.Contains(offered, "client_secret_post"):
		return oauth2.AuthStyleInParams
	case len(offered) == 0 || slices.Contains(offered, "client_secret_basic"):
		// RFC 8414: an absent list means client_secret_basic.
		return oauth2.AuthStyleInHeader
	default:
		return oauth2.AuthStyleAutoDetect
	}
}

// Issuer returns the provider's issuer URL.
func (l *Login) Issuer() string { return l.cfg.Issuer }

// Start sends the browser to the provider to log in. state is the
// caller's opaque value (at most 1 KiB), returned by Finish; the login's
// own CSRF state, nonce and PKCE verifier live in a cookie for 10 minutes.
func (l *Login) Start(w http.ResponseWriter, r *http.Request, state string) {
	if len(state) > maxCallerState {
		wire.WriteError(w, wire.Errorf(wire.CodeBadRequest, "login state is %d bytes; at most %d are kept", len(state), maxCallerState))
		return
	}
	p := pending{CallerState: state, Verifier: oauth2.GenerateVerifier(), Expires: l.now().Add(cookieTTL).Unix()}
	var err error
	if p.State, err = randomString(); err == nil {
		p.Nonce, err = randomString()
	}
	if err != nil {
		wire.WriteError(w, fmt.Errorf("start login at %s: %w", l.cfg.Issuer, err))
		return
	}
	name := cookiePrefix + p.State
	value, err := l.seal.seal(name, p)
	if err != nil {
		wire.WriteError(w, fmt.Errorf("start login at %s: %w", l.cfg.Issuer, err))
		return
	}
	l.setCookie(w, name, value)
	w.Header().Set("Cache-Control", "no-store")
	to := l.oauth.AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oidc.Nonce(p.Nonce))
	http.Redirect(w, r, to, http.StatusFound)
}

// Finish completes a login at RedirectURL: it checks the state against
// the cookie Start set, exchanges the code with the PKCE verifier,
// verifies the ID token and its nonce, and maps its claims. It returns
// the caller's state from Start whenever the cookie was valid, even with
// an error, so the caller can answer whoever started the login. Errors
// are coded (wire) and their messages are meant for the user.
func (l *Login) Finish(w http.ResponseWriter, r *http.Request) (Identity, string, error) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		return Identity{}, "", wire.Errorf(wire.CodeBadRequest, "the identity provider's answer has no state parameter")
	}
	p, err := l.pendingFor(w, r, state)
	if err != nil {
		return Identity{}, "", err
	}
	id, err := l.finish(r, q, p)
	return id, p.CallerState, err
}

func (l *Login) pendingFor(w http.ResponseWriter, r *http.Request, state string) (pending, error) {
	name := cookiePrefix + state
	c, err := r.Cookie(name)
	if err != nil {
		return pending{}, wire.Errorf(wire.CodeBadRequest,
			"state mismatch: this browser did not start a login with the state the identity provider sent back (the login cookie is missing, expired or blocked); start the login again")
	}
	// The cookie is single use, whatever happens next.
	l.setCookie(w, name, "")
	p, err := l.seal.open(name, c.Value)
	if err != nil {
		return pending{}, wire.Errorf(wire.CodeBadRequest, "state mismatch: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(p.State), []byte(state)) != 1 {
		return pending{}, wire.Errorf(wire.CodeBadRequest, "state mismatch: the identity provider sent back a state this login did not send")
	}
	if l.now().Unix() > p.Expires {
		return pending{}, wire.Errorf(wire.CodeBadRequest, "the login took longer than %s; start it again", cookieTTL)
	}
	return p, nil
}

func (l *Login) finish(r *http.Request, q url.Values, p pending) (Identity, error) {
	if e := q.Get("error"); e != "" {
		return Identity{}, providerError(e, q.Get("error_description"))
	}
	// RFC 9207: a provider that names itself must be the one we sent the
	// user to, else this is a mix-up attack.
	if iss := q.Get("iss"); iss != "" && iss != l.cfg.Issuer {
		return Identity{}, wire.Errorf(wire.CodeBadRequest, "the answer names issuer %q, but the login was sent to %q", clip(iss), l.cfg.Issuer)
	}
	code := q.Get("code")
	if code == "" {
		return Identity{}, wire.Errorf(wire.CodeBadRequest, "the identity provider's answer has neither a code nor an error")
	}
	ctx := oidc.ClientContext(r.Context(), l.client)
	tok, err := l.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, wire.Errorf(wire.CodeUnauthorized, "the identity provider %s refused the authorization code: %s", l.cfg.Issuer, describeRetrieve(re))
		}
		return Identity{}, wire.Errorf(wire.CodeBadGateway, "exchange the authorization code at %s: %w", l.cfg.Issuer, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, wire.Errorf(wire.CodeBadGateway, "the identity provider %s returned no ID token (is the openid scope allowed for this client?)", l.cfg.Issuer)
	}
	idt, err := l.verify(ctx, raw)
	if err != nil {
		return Identity{}, err
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		return Identity{}, wire.Errorf(wire.CodeUnauthorized, "nonce mismatch: the ID token was not issued for this login (replayed or mixed up)")
	}
	return l.identity(idt)
}

func providerError(code, desc string) error {
	msg := fmt.Sprintf("the identity provider returned error=%s", clip(code))
	if desc != "" {
		msg += ": " + clip(desc)
	}
	if code == "access_denied" {
		return wire.Errorf(wire.CodeForbidden, "%s", msg)
	}
	return wire.Errorf(wire.CodeUnauthorized, "%s", msg)
}

func describeRetrieve(re *oauth2.RetrieveError) string {
	switch {
	case re.ErrorCode != "" && re.ErrorDescription != "":
		return fmt.Sprintf("error=%s: %s", clip(re.ErrorCode), clip(re.ErrorDescription))
	case re.ErrorCode != "":
		return "error=" + clip(re.ErrorCode)
	case re.Response != nil:
		return fmt.Sprintf("HTTP %d", re.Response.StatusCode)
	default:
		return "no reason given"
	}
}

// clip bounds text that came from the network before it is shown.
func clip(s string) string {
	const limit = 200
	if len(s) > limit {
		return strings.ToValidUTF8(s[:limit], "") + "..."
	}
	return s
}

func randomString() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
