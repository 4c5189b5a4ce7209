package oauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
	"github.com/berth-mcp/berth/web"
)

// Users is what the authorization server needs of berth's identity rules
// (orchestrator.Identity implements it).
type Users interface {
	// EnsureUser returns the user, creating it on first login.
	EnsureUser(ctx context.Context, nu store.NewUser) (store.User, bool, error)
	// PrincipalForUser builds the principal of a token: the user's role
	// bindings with the token's scopes. A missing or disabled user is a
	// wire.CodeUnauthorized error.
	PrincipalForUser(ctx context.Context, userID string, scopes []rbac.Scope, tokenID string) (rbac.Principal, error)
	// ForgetCredentials drops the session tokens' principals cached on
	// this replica: a revocation here revokes the session tokens minted
	// with what it revoked, which must stop working at once too.
	ForgetCredentials()
}

// UpstreamIdentity is who logged in at the upstream identity provider.
type UpstreamIdentity struct {
	Subject, Username, Email, Name string
	Groups                         []string
}

// Upstream is a login at an upstream OpenID Connect provider
// (internal/oauth/oidclogin).
type Upstream interface {
	// Start redirects the browser to the provider; state comes back from
	// Finish.
	Start(w http.ResponseWriter, r *http.Request, state string)
	// Finish handles the redirect back at /oauth/login/callback and
	// returns who logged in and the state given to Start.
	Finish(w http.ResponseWriter, r *http.Request) (UpstreamIdentity, string, error)
}

// Options configure the authorization server.
type Options struct {
	// PublicURL is the URL clients reach berth at. It is the issuer, and
	// it and PublicURL + "/mcp" are the protected resources.
	PublicURL string
	Store     *store.Store
	Users     Users
	// DevLogin enables the login page that takes a username without a
	// password. Only for development: New refuses it unless PublicURL is
	// on a loopback address (DevLoginAllowed).
	DevLogin bool
	// Upstream is the OpenID Connect login; UpstreamName names it on the
	// login page. At least one of DevLogin and Upstream must be set.
	Upstream     Upstream
	UpstreamName string
	// AllowPrivateCIMD lets client ID metadata documents be fetched from
	// private, loopback and link-local addresses. Only for tests.
	AllowPrivateCIMD bool
	// CIMDTLSConfig is the TLS configuration for fetching client ID
	// metadata documents; nil uses the system roots.
	CIMDTLSConfig *tls.Config
	// Lifetimes; zero values get the defaults (1 h, 30 days, 60 s, 12 h).
	AccessTokenTTL  time.Duration
	RefreshTokenTTL time.Duration
	CodeTTL         time.Duration
	SessionTTL      time.Duration
	// RegistrationLimit bounds open Dynamic Client Registration per client
	// address (an IPv6 client by its /64); default 10 a minute, burst 5.
	// Only registrations that would be stored count.
	RegistrationLimit RateLimit
	// CIMDHostLimit and CIMDTotalLimit bound the fetches of client ID
	// metadata documents, per host and over all hosts, so that berth
	// cannot be made to hammer a third party; defaults 30 a minute (burst
	// 10) per host and 120 a minute (burst 30) in all. Documents served
	// from the cache do not count.
	CIMDHostLimit  RateLimit
	CIMDTotalLimit RateLimit
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed when finding a client's address; none by default, so the
	// address is the connection's peer.
	TrustedProxies []netip.Prefix
	// ResourceDocumentation is a URL describing the service for
	// developers (protected resource metadata); "" leaves it out.
	ResourceDocumentation string
	// Now is the clock; nil is time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the authorization server. Its handler serves
// /.well-known/oauth-*, /.well-known/openid-configuration, /oauth/* and
// /account/*.
type Server struct {
	opts      Options
	issuer    string
	resources []string // normalized: <public>, <public>/mcp
	secure    bool     // the public URL is https: cookies are Secure
	cimd      *cimdFetcher
	regLimit  *buckets[netip.Prefix]
	pages     *web.Pages
	log       *slog.Logger
	now       func() time.Time
	cache     auth.PrincipalCache
	sessions  *websession.Sessions
	handler   http.Handler
}

// New checks opts and returns the authorization server.
func New(opts Options) (*Server, error) {
	if opts.Store == nil || opts.Users == nil {
		return nil, errors.New("oauth: Store and Users are required")
	}
	if !opts.DevLogin && opts.Upstream == nil {
		return nil, errors.New("oauth: no way to log in: enable the development login or configure an upstream OpenID Connect provider")
	}
	issuer, err := normalizeURL(strings.TrimRight(opts.PublicURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("oauth: public URL: %w", err)
	}
	if rest := issuer[strings.Index(issuer, "://")+3:]; strings.ContainsAny(rest, "/?") {
		// The endpoints and the RFC 8414 well-known URLs are served at
		// the root; an issuer with a path would need them under it.
		return nil, fmt.Errorf("oauth: public URL %q must have no path or query (serve berth at the root of its host)", opts.PublicURL)
	}
	if opts.DevLogin {
		if err := DevLoginAllowed(issuer); err != nil {
			return nil, err
		}
	}
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = time.Hour
	}
	if opts.RefreshTokenTTL <= 0 {
		opts.RefreshTokenTTL = 30 * 24 * time.Hour
	}
	if opts.CodeTTL <= 0 {
		opts.CodeTTL = 60 * time.Second
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.UpstreamName == "" {
		opts.UpstreamName = "your identity provider"
	}
	if opts.RegistrationLimit, err = opts.RegistrationLimit.withDefault("RegistrationLimit", defaultRegistrationLimit); err != nil {
		return nil, err
	}
	if opts.CIMDHostLimit, err = opts.CIMDHostLimit.withDefault("CIMDHostLimit", defaultCIMDHostLimit); err != nil {
		return nil, err
	}
	if opts.CIMDTotalLimit, err = opts.CIMDTotalLimit.withDefault("CIMDTotalLimit", defaultCIMDTotalLimit); err != nil {
		return nil, err
	}
	opts.TrustedProxies = slices.Clone(opts.TrustedProxies)
	for i, p := range opts.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("oauth: TrustedProxies[%d] is not a valid prefix", i)
		}
	}
	pages, err := web.New()
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	s := &Server{
		opts:      opts,
		issuer:    issuer,
		resources: []string{issuer, issuer + "/mcp"},
		secure:    strings.HasPrefix(issuer, "https://"),
		pages:     pages,
		log:       opts.Logger,
		now:       opts.Now,
		regLimit:  newBuckets[netip.Prefix](opts.RegistrationLimit, maxRegistrationBuckets),
	}
	s.sessions, err = websession.New(websession.Options{
		Store: opts.Store, Secure: s.secure, TTL: opts.SessionTTL, FormTTL: formTTL, Origin: issuer, Now: opts.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	s.cimd = newCIMDFetcher(opts.AllowPrivateCIMD, opts.CIMDTLSConfig, opts.Now, opts.CIMDHostLimit, opts.CIMDTotalLimit)
	s.handler = s.routes()
	return s, nil
}

// formTTL is how long a page's form stays good to send.
const formTTL = time.Hour

// DevLoginAllowed reports, as an error naming why, when the development
// login may not be enabled for a berth reached at publicURL: it lets
// anyone sign in as anyone without a password, so it is only for a berth
// reached at a loopback address (127.0.0.1, [::1], localhost), which only
// the machine's own users can reach.
func DevLoginAllowed(publicURL string) error {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("oauth: the development login needs a loopback public URL; %q is not a URL", publicURL)
	}
	if !hostguard.IsLoopback(u.Hostname()) {
		return fmt.Errorf("oauth: the development login lets anyone sign in as anyone without a password, so it is only allowed on a loopback address; the issuer %s is reached at %s", publicURL, u.Hostname())
	}
	return nil
}

// Issuer returns the issuer identifier (the normalized public URL).
func (s *Server) Issuer() string { return s.issuer }

// Sessions are the browser sessions the login pages start: berth's other
// pages (the console) read the same ones, so one sign-in serves all.
func (s *Server) Sessions() *websession.Sessions { return s.sessions }

// SignOutPurpose is the CSRF purpose of the sign-out form (POST
// /oauth/logout, fields csrf and return_to), for pages that show one.
const SignOutPurpose = csrfAccount

// Handler serves the authorization server's endpoints and pages.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	cors := allowAnyOrigin
	mux.Handle("GET /.well-known/oauth-protected-resource", cors(http.HandlerFunc(s.serveResourceMetadata)))
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", cors(http.HandlerFunc(s.serveResourceMetadata)))
	mux.Handle("GET /.well-known/oauth-authorization-server", cors(http.HandlerFunc(s.serveServerMetadata)))
	mux.Handle("GET /.well-known/openid-configuration", cors(http.HandlerFunc(s.serveServerMetadata)))
	mux.Handle("POST /oauth/register", cors(http.HandlerFunc(s.register)))
	mux.Handle("/oauth/register/{client_id}", cors(http.HandlerFunc(s.manageRegistration)))
	mux.Handle("POST /oauth/token", cors(http.HandlerFunc(s.token)))
	mux.Handle("POST /oauth/revoke", cors(http.HandlerFunc(s.revoke)))
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
		"/oauth/register", "/oauth/token", "/oauth/revoke"} {
		mux.Handle("OPTIONS "+p, cors(http.HandlerFunc(noContent)))
	}
	mux.HandleFunc("GET /oauth/authorize", s.authorize)
	mux.HandleFunc("POST /oauth/authorize", s.consent)
	mux.HandleFunc("GET /oauth/login", s.loginPage)
	mux.HandleFunc("GET /oauth/login/start", s.loginStart)
	mux.HandleFunc("POST /oauth/login", s.devLogin)
	mux.HandleFunc("GET /oauth/login/upstream", s.upstreamStart)
	mux.HandleFunc("GET /oauth/login/callback", s.upstreamCallback)
	mux.HandleFunc("POST /oauth/logout", s.logout)
	mux.HandleFunc("GET /account/apps", s.appsPage)
	mux.HandleFunc("POST /account/apps/revoke", s.revokeApp)
	return mux
}

// allowAnyOrigin lets browser-based MCP clients read the metadata and use
// the token and registration endpoints (RFC 8414 and the MCP
// specification expect CORS there). No cookies are involved on these
// endpoints, so any origin is safe.
func allowAnyOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Mcp-Protocol-Version")
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
		next.ServeHTTP(w, r)
	})
}

func noContent(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// fail answers an endpoint error in OAuth's JSON format; anything but an
// *oauthError is logged and answered without details: as
// temporarily_unavailable (503) when the database cannot be reached, else
// as server_error.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	if errors.As(err, &oe) {
		writeOAuthError(w, oe)
		return
	}
	s.log.Error("oauth request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	if errors.Is(store.Classify(err), store.ErrUnavailable) {
		writeOAuthError(w, unavailable())
		return
	}
	writeOAuthError(w, &oauthError{Code: errServerError, Description: "internal error", Status: http.StatusInternalServerError})
}

// audit records an event in berth's audit log; failures are logged only,
// since the answer does not depend on them.
func (s *Server) audit(ctx context.Context, userID, username, action, target, outcome string, detail map[string]any) {
	err := s.opts.Store.Audit(context.WithoutCancel(ctx), store.AuditEntry{
		ActorID: userID, Actor: username, Action: action, TargetKind: "oauth_client", TargetID: target,
		Outcome: outcome, Detail: detail,
	})
	if err != nil {
		s.log.Error("write audit log", "action", action, "err", err)
	}
}

// challengeURL returns the protected resource metadata URL for a request
// to the resource: the path-suffixed one for /mcp (RFC 9728 3.1).
func challengeURL(issuer string, r *http.Request) string {
	base := requestBase(issuer, r)
	if r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/mcp/") {
		return base + "/.well-known/oauth-protected-resource/mcp"
	}
	return base + "/.well-known/oauth-protected-resource"
}

// ResourceMetadataURL returns the function auth.MiddlewareOptions needs to
// point 401 and 403 challenges at the protected resource metadata of the
// endpoint: <public>/.well-known/oauth-protected-resource/mcp for /mcp,
// <public>/.well-known/oauth-protected-resource for everything else.
func ResourceMetadataURL(publicURL string) func(*http.Request) string {
	base := strings.TrimRight(publicURL, "/")
	return func(r *http.Request) string { return challengeURL(base, r) }
}

// ChallengeScopes is the scope parameter of a 401 challenge: the scopes a
// client should ask for to use berth (everything but administration).
func ChallengeScopes(*http.Request) []string { return rbac.ScopeStrings(defaultScopes) }

// defaultScopes are granted when an authorization request names none.
var defaultScopes = []rbac.Scope{rbac.ScopeRead, rbac.ScopeWrite, rbac.ScopeExec}
