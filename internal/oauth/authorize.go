package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/web"
)

const (
	maxAuthorizeQuery = 8 << 10
	maxStateLen       = 1024
)

// authzRequest is a validated authorization request.
type authzRequest struct {
	client      *client
	redirectURI string
	state       string
	challenge   string
	// scopes are those asked for until withholdScopes leaves only what
	// the user's roles can use; withheld are the others.
	scopes   []string
	withheld []string
	resource string // normalized
	prompt   string
	// query is the request's query string, to resume it after login and
	// to post it back with the consent answer.
	query string
}

// s256Challenge is the shape of an S256 code challenge: base64url of a
// SHA-256, 43 characters.
var s256Challenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// single returns the one value of name; a repeated parameter is an error
// (RFC 6749 3.1).
func single(q url.Values, name string) (string, error) {
	v := q[name]
	switch len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", fmt.Errorf("parameter %s is repeated", name)
}

// parseAuthorize validates an authorization request. Errors found before
// the client and its redirect URI are known are returned as pageErr (they
// must not be sent to an unverified URI); later ones as redirectErr, to be
// sent back to the client with the request's state. Other errors are
// internal.
func (s *Server) parseAuthorize(ctx context.Context, rawQuery string) (req *authzRequest, pageErr, redirectErr *oauthError, err error) {
	if len(rawQuery) > maxAuthorizeQuery {
		return nil, oerr(errInvalidRequest, "the authorization request is longer than %d bytes", maxAuthorizeQuery), nil, nil
	}
	q, perr := url.ParseQuery(rawQuery)
	if perr != nil {
		return nil, oerr(errInvalidRequest, "the authorization request's query is malformed: %v", perr), nil, nil
	}
	clientID, perr := single(q, "client_id")
	if perr != nil {
		return nil, oerr(errInvalidRequest, "%v", perr), nil, nil
	}
	if clientID == "" {
		return nil, oerr(errInvalidRequest, "client_id is missing"), nil, nil
	}
	c, err := s.lookupClient(ctx, clientID)
	if err != nil {
		var oe *oauthError
		if errors.As(err, &oe) {
			return nil, oe, nil, nil
		}
		return nil, nil, nil, err
	}
	redirectURI, perr := single(q, "redirect_uri")
	if perr != nil {
		return nil, oerr(errInvalidRequest, "%v", perr), nil, nil
	}
	if redirectURI == "" {
		return nil, oerr(errInvalidRequest, "redirect_uri is missing"), nil, nil
	}
	if !redirectMatches(c.Meta.RedirectURIs, redirectURI) {
		return nil, oerr(errInvalidRequest, "redirect_uri %q is not registered for client %s", redirectURI, c.name()), nil, nil
	}
	req = &authzRequest{client: c, redirectURI: redirectURI, query: rawQuery}
	// From here on errors go back to the client. The state goes with
	// them, unless it is the faulty parameter.
	state, perr := single(q, "state")
	if perr != nil {
		return req, nil, oerr(errInvalidRequest, "%v", perr), nil
	}
	if len(state) > maxStateLen {
		return req, nil, oerr(errInvalidRequest, "state is longer than %d characters", maxStateLen), nil
	}
	req.state = state
	for _, name := range []string{"response_type", "code_challenge", "code_challenge_method", "resource", "scope", "prompt"} {
		if _, perr := single(q, name); perr != nil {
			return req, nil, oerr(errInvalidRequest, "%v", perr), nil
		}
	}
	switch rt := q.Get("response_type"); rt {
	case respCode:
	case "":
		return req, nil, oerr(errInvalidRequest, "response_type is missing; use code"), nil
	default:
		return req, nil, oerr(errUnsupportedResponseType, "response_type %q is not supported; use code", rt), nil
	}
	if !c.allowsGrant(grantCode) {
		return req, nil, oerr(errUnauthorizedClient, "the client is not registered for the authorization_code grant"), nil
	}
	switch m := q.Get("code_challenge_method"); m {
	case "S256":
	case "":
		return req, nil, oerr(errInvalidRequest, "code_challenge_method is missing; PKCE with S256 is required"), nil
	case "plain":
		return req, nil, oerr(errInvalidRequest, "code_challenge_method plain is not allowed; use S256"), nil
	default:
		return req, nil, oerr(errInvalidRequest, "code_challenge_method %q is not supported; use S256", m), nil
	}
	req.challenge = q.Get("code_challenge")
	if req.challenge == "" {
		return req, nil, oerr(errInvalidRequest, "code_challenge is missing; PKCE with S256 is required"), nil
	}
	if !s256Challenge.MatchString(req.challenge) {
		return req, nil, oerr(errInvalidRequest, "code_challenge must be the base64url SHA-256 of the verifier (43 characters)"), nil
	}
	resource, oe := s.checkResource(q.Get("resource"), true)
	if oe != nil {
		return req, nil, oe, nil
	}
	req.resource = resource
	scopes, oe := checkScopes(q.Get("scope"), c)
	if oe != nil {
		return req, nil, oe, nil
	}
	req.scopes = scopes
	req.prompt = q.Get("prompt")
	prompts := strings.Fields(req.prompt)
	for _, p := range prompts {
		if p != "none" && p != "login" && p != "consent" && p != "select_account" {
			return req, nil, oerr(errInvalidRequest, "prompt %q is not supported", p), nil
		}
	}
	if slices.Contains(prompts, "none") && len(prompts) > 1 {
		// OpenID Connect Core 3.1.2.1.
		return req, nil, oerr(errInvalidRequest, "prompt none cannot be combined with other values (got %q)", req.prompt), nil
	}
	return req, nil, nil, nil
}

// checkResource checks a resource indicator (RFC 8707) against this
// server's resources and returns its normal form.
func (s *Server) checkResource(raw string, required bool) (string, *oauthError) {
	if raw == "" {
		if required {
			return "", oerr(errInvalidTarget, "resource is missing; name the resource the token is for, e.g. %s/mcp", s.issuer)
		}
		return "", nil
	}
	n, err := normalizeURL(raw)
	if err != nil {
		return "", oerr(errInvalidTarget, "resource: %v", err)
	}
	n = canonicalResource(s.issuer, n)
	if !slices.Contains(s.resources, n) {
		return "", oerr(errInvalidTarget, "resource %q is not served here; use %s or %s", raw, s.resources[0], s.resources[1])
	}
	return n, nil
}

// checkScopes parses a scope parameter: berth's scopes only, within what
// the client registered; empty means the default scopes.
func checkScopes(raw string, c *client) ([]string, *oauthError) {
	names := strings.Fields(raw)
	if len(names) == 0 {
		names = rbac.ScopeStrings(defaultScopes)
		if allowed := c.allowedScopes(); allowed != nil {
			names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(allowed, n) })
			if len(names) == 0 {
				names = allowed
			}
		}
	}
	scopes, err := rbac.ParseScopes(names)
	if err != nil {
		return nil, oerr(errInvalidScope, "%v", err)
	}
	out := rbac.ScopeStrings(scopes)
	if allowed := c.allowedScopes(); allowed != nil {
		for _, n := range out {
			if !slices.Contains(allowed, n) {
				return nil, oerr(errInvalidScope, "scope %q was not registered for this client", n)
			}
		}
	}
	return out, nil
}

// lookupClient finds a registered client or fetches a metadata document
// client. An unknown client is an *oauthError invalid_client.
func (s *Server) lookupClient(ctx context.Context, id string) (*client, error) {
	if len(id) > maxRedirectURILen {
		return nil, oerr(errInvalidClient, "client_id is longer than %d characters", maxRedirectURILen)
	}
	if isCIMDClientID(id) {
		m, err := s.cimd.get(ctx, id)
		if err != nil {
			return nil, err
		}
		return &client{ID: id, Meta: m, FromDocument: true}, nil
	}
	rc, err := s.registeredClientByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, oerr(errInvalidClient, "unknown client_id %q: register the client first (%s/oauth/register) or use a client ID metadata document URL", id, s.issuer)
	}
	if err != nil {
		return nil, err
	}
	return &rc.client, nil
}

// redirectError sends an authorization error back to the client.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, req *authzRequest, oe *oauthError) {
	v := url.Values{"error": {oe.Code}, "error_description": {oe.Description}}
	s.redirectBack(w, r, req, v)
}

// redirectBack redirects to the client with params, the state and the
// issuer (RFC 9207).
func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, req *authzRequest, params url.Values) {
	u, err := url.Parse(req.redirectURI)
	if err != nil {
		// redirectMatches parsed it before; never reached.
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "the redirect URI does not parse")
		return
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if req.state != "" {
		q.Set("state", req.state)
	}
	q.Set("iss", s.issuer)
	u.RawQuery = q.Encode()
	status := http.StatusFound
	if r.Method == http.MethodPost {
		status = http.StatusSeeOther
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), status)
}

// authorize is GET /oauth/authorize: validate, make sure the user is
// logged in, then ask for consent or, when it was given before, answer
// with a code.
//
// prompt=login ignores the browser's session until the user has logged in
// for this request; prompt=consent asks even when consent was given
// before; prompt=none never shows a page (OpenID Connect Core 3.1.2.1).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	query, marker := splitFreshLogin(r.URL.RawQuery)
	req := s.readAuthorize(w, r, query)
	if req == nil {
		return
	}
	b, err := s.sessions.Get(r)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	prompts := strings.Fields(req.prompt)
	if b != nil && slices.Contains(prompts, "login") && !loggedInFor(b, req.query, marker) {
		b = nil
	}
	if b == nil {
		if slices.Contains(prompts, "none") {
			s.redirectError(w, r, req, oerr(errLoginRequired, "the user is not signed in"))
			return
		}
		s.loginRedirect(w, r, "/oauth/authorize?"+req.query)
		return
	}
	if !s.withholdScopes(w, r, req, b) {
		return
	}
	covered, err := s.consentCovers(r.Context(), b.UserID, req.client.ID, req.scopes)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	if covered && !slices.Contains(prompts, "consent") {
		s.issueAndRedirect(w, r, req, b)
		return
	}
	if slices.Contains(prompts, "none") {
		s.redirectError(w, r, req, oerr(errConsentRequired, "the user has not approved this client for these scopes"))
		return
	}
	s.render(w, r, http.StatusOK, web.PageConsent, s.consentData(req, b))
}

// readAuthorize parses the authorization request in query. It returns nil
// when the request is refused and the browser answered: on a page while
// the redirect URI is not verified, else by a redirect to the client.
func (s *Server) readAuthorize(w http.ResponseWriter, r *http.Request, query string) *authzRequest {
	req, pageErr, redirectErr, err := s.parseAuthorize(r.Context(), query)
	switch {
	case err != nil:
		s.pageFail(w, r, err)
		return nil
	case pageErr != nil:
		pageErr.setRetryAfter(w)
		s.renderError(w, pageErr.status(), pageErr.Code, pageErr.Description)
		return nil
	case redirectErr != nil:
		s.redirectError(w, r, req, redirectErr)
		return nil
	}
	return req
}

// consent is POST /oauth/authorize: the user's answer on the consent page.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	// The form's token is bound to the authorization request its page
	// showed (the query, which holds the client, redirect URI, scopes,
	// PKCE challenge and state): a token from one consent page cannot
	// approve another request.
	b := s.signedInForm(w, r, "Your sign-in expired. Go back to the application and start again.", "The consent form", csrfConsent, "query")
	if b == nil {
		return
	}
	req := s.readAuthorize(w, r, r.PostForm.Get("query"))
	if req == nil || !s.withholdScopes(w, r, req, b) {
		return
	}
	switch r.PostForm.Get("decision") {
	case "approve":
		if err := s.saveConsent(r.Context(), b.UserID, req.client, req.scopes); err != nil {
			s.pageFail(w, r, err)
			return
		}
		s.audit(r.Context(), b.UserID, b.Username, "oauth.consent.grant", req.client.ID, "ok", map[string]any{"scopes": req.scopes})
		s.issueAndRedirect(w, r, req, b)
	case "deny":
		s.audit(r.Context(), b.UserID, b.Username, "oauth.consent.deny", req.client.ID, "denied", nil)
		s.redirectError(w, r, req, oerr(errAccessDenied, "the user denied the request"))
	default:
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "The answer must be approve or deny.")
	}
}

func (s *Server) issueAndRedirect(w http.ResponseWriter, r *http.Request, req *authzRequest, b *browserSession) {
	code, err := s.issueCode(r.Context(), req, b.UserID)
	if err != nil {
		s.log.Error("issue authorization code", "client_id", req.client.ID, "err", err)
		if errors.Is(store.Classify(err), store.ErrUnavailable) {
			s.redirectError(w, r, req, unavailable())
			return
		}
		s.redirectError(w, r, req, oerr(errServerError, "internal error"))
		return
	}
	s.redirectBack(w, r, req, url.Values{"code": {code}})
}

// scopeDescriptions say what each scope lets an application do.
var scopeDescriptions = map[string]string{
	string(rbac.ScopeRead):  "see your sandboxes, clients and operations",
	string(rbac.ScopeWrite): "create, restart and delete your sandboxes",
	string(rbac.ScopeExec):  "run commands, read and edit files and forward requests in your sandboxes",
	string(rbac.ScopeAdmin): "administer berth (users, roles, audit log) if you are an administrator",
}

func (s *Server) consentData(req *authzRequest, b *browserSession) web.Consent {
	d := web.Consent{
		Username: b.Username, ClientName: req.client.name(), ClientID: req.client.ID,
		FromDocument: req.client.FromDocument, Query: req.query, CSRF: s.sessions.CSRF(b, csrfConsent, req.query),
	}
	if u, err := url.Parse(req.redirectURI); err == nil {
		d.RedirectHost = u.Host
		if u.Scheme != "https" {
			d.RedirectHost = u.Scheme + "://" + u.Host
		}
	}
	for _, sc := range req.scopes {
		d.Scopes = append(d.Scopes, web.Scope{Name: sc, Description: scopeDescriptions[sc]})
	}
	d.Withheld = req.withheld
	return d
}

// withholdScopes leaves in req only the scopes the user's roles can use
// (rbac.UsableScopes), so that no grant claims more than its user can do
// (a member asking for berth:admin gets the rest), and remembers the
// others for the consent page. When none is left the client is told
// (invalid_scope) and it returns false, having answered the browser.
func (s *Server) withholdScopes(w http.ResponseWriter, r *http.Request, req *authzRequest, b *browserSession) bool {
	p, err := s.opts.Users.PrincipalForUser(r.Context(), b.UserID, nil, "")
	if err != nil {
		s.pageFail(w, r, fmt.Errorf("roles of %s: %w", b.Username, err))
		return false
	}
	usable := rbac.ScopeStrings(rbac.UsableScopes(p.Bindings))
	var granted, withheld []string
	for _, sc := range req.scopes {
		if slices.Contains(usable, sc) {
			granted = append(granted, sc)
		} else {
			withheld = append(withheld, sc)
		}
	}
	if len(granted) == 0 {
		s.redirectError(w, r, req, oerr(errInvalidScope, "none of the requested scopes (%s) can be granted: the roles of user %s do not allow them",
			strings.Join(req.scopes, " "), b.Username))
		return false
	}
	req.scopes, req.withheld = granted, withheld
	return true
}

// consentCovers reports whether the user approved the client for every
// one of scopes before.
func (s *Server) consentCovers(ctx context.Context, userID, clientID string, scopes []string) (bool, error) {
	have, err := s.opts.Store.ConsentScopes(ctx, userID, clientID)
	if err != nil {
		return false, err
	}
	for _, sc := range scopes {
		if !slices.Contains(have, sc) {
			return false, nil
		}
	}
	return true, nil
}

// saveConsent records the approval, adding scopes to earlier ones.
func (s *Server) saveConsent(ctx context.Context, userID string, c *client, scopes []string) error {
	return s.opts.Store.SaveConsent(ctx, userID, c.ID, c.Meta.ClientName, scopes)
}

// issueCode creates the grant and its authorization code.
func (s *Server) issueCode(ctx context.Context, req *authzRequest, userID string) (string, error) {
	code, hash, err := newSecret(codePrefix)
	if err != nil {
		return "", err
	}
	now := s.now()
	return code, s.opts.Store.CreateOAuthCode(ctx, store.NewOAuthCode{
		CodeHash: hash, UserID: userID, ClientID: req.client.ID, Scopes: req.scopes, Resource: req.resource,
		RedirectURI: req.redirectURI, CodeChallenge: req.challenge, ExpiresAt: now.Add(s.opts.CodeTTL),
		// Old codes are no longer needed once well past their expiry.
		PruneCodesExpiredBefore: now.Add(-10 * time.Minute),
	})
}
