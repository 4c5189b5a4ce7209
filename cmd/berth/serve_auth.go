package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/keys"
	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/oauth/external"
	"github.com/berth-mcp/berth/internal/oauth/oidclogin"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
)

// authFlags configure who may call berth and how they log in.
type authFlags struct {
	mode               string
	devLogin           bool
	devLoginSet        bool
	oidcIssuer         string
	oidcName           string
	oidcClientID       string
	oidcClientSecretFn string
	oidcScopes         []string
	oidcGroupsClaim    string
	oidcDomains        []string
	externalAudience   string
	registrationRate   float64
	trustedProxies     []string
}

func (f *authFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "auth-mode", "builtin", "builtin: berth is the OAuth authorization server (logins via --oidc-* or the dev login); external: accept JWT access tokens of the --oidc-issuer")
	fl.BoolVar(&f.devLogin, "dev-login", false, "enable the password-less development login page (default: on when listening on loopback with no --oidc-issuer)")
	fl.StringVar(&f.oidcIssuer, "oidc-issuer", "", "OpenID Connect issuer users log in at (Keycloak, Dex, Entra ID, Google, ...)")
	fl.StringVar(&f.oidcName, "oidc-name", "", "name of the identity provider on the login page (default: the issuer's host)")
	fl.StringVar(&f.oidcClientID, "oidc-client-id", "", "berth's client id at the OpenID provider")
	fl.StringVar(&f.oidcClientSecretFn, "oidc-client-secret-file", "", "file holding berth's client secret at the OpenID provider (none: a public client with PKCE)")
	fl.StringSliceVar(&f.oidcScopes, "oidc-scopes", nil, "scopes asked of the OpenID provider (default openid,email,profile)")
	fl.StringVar(&f.oidcGroupsClaim, "oidc-groups-claim", "", "ID/access token claim holding the user's groups, which role bindings can name")
	fl.StringSliceVar(&f.oidcDomains, "oidc-allowed-domains", nil, "email domains allowed to log in (default: any)")
	fl.Float64Var(&f.registrationRate, "oauth-registration-rate", 0, "dynamic client registrations allowed per minute from one client address, burst half of it (default 10, burst 5; negative: no limit)")
	fl.StringSliceVar(&f.trustedProxies, "oauth-trusted-proxies", nil, "addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For gives the client address for rate limits (default: none, use the peer address)")
	fl.StringVar(&f.externalAudience, "external-audience", "", "with --auth-mode external: the audience access tokens must carry (default <public-url>/mcp)")
}

// authSetup is the authentication of a running server.
type authSetup struct {
	middleware auth.MiddlewareOptions
	// handler serves /.well-known/*, /oauth/* and /account/*; nil when
	// OAuth is off.
	handler http.Handler
	// sessions are the browser sessions of the login pages, which the
	// console reads too; nil when there is no browser sign-in.
	sessions *websession.Sessions
	summary  string
}

// setupAuth builds the authenticators and the OAuth endpoints for the
// chosen mode. Session tokens work in every mode.
func setupAuth(ctx context.Context, f authFlags, publicURL, listenAddr string, st *store.Store, svc *orchestrator.Service, serverKey []byte, log *slog.Logger) (authSetup, error) {
	setup := authSetup{middleware: auth.MiddlewareOptions{
		Authenticators:      []auth.Authenticator{svc},
		Realm:               "berth",
		Logger:              log,
		ResourceMetadataURL: oauth.ResourceMetadataURL(publicURL),
		Scopes:              oauth.ChallengeScopes,
	}}
	docs := publicURL + "/api/openapi.json"
	switch f.mode {
	case "external":
		if f.oidcIssuer == "" {
			return authSetup{}, fmt.Errorf("--auth-mode external needs --oidc-issuer (the authorization server whose tokens berth accepts)")
		}
		if f.devLogin {
			return authSetup{}, fmt.Errorf("--dev-login is for the built-in authorization server; it does nothing with --auth-mode external")
		}
		audience := f.externalAudience
		if audience == "" {
			audience = publicURL + "/mcp"
		}
		ext, err := external.New(ctx, external.Config{Issuer: f.oidcIssuer, Audience: audience, GroupsClaim: f.oidcGroupsClaim}, externalUsers{svc.Identity})
		if err != nil {
			return authSetup{}, err
		}
		setup.middleware.Authenticators = append(setup.middleware.Authenticators, ext)
		mux := http.NewServeMux()
		meta := oauth.ResourceMetadataHandler(publicURL, ext.Issuer(), docs)
		mux.Handle("/.well-known/oauth-protected-resource", meta)
		mux.Handle("/.well-known/oauth-protected-resource/mcp", meta)
		setup.handler = mux
		setup.summary = "OAuth: access tokens from " + f.oidcIssuer + " (audience " + audience + ")"
		return setup, nil
	case "builtin":
	default:
		return authSetup{}, fmt.Errorf("--auth-mode %q: want builtin or external", f.mode)
	}

	// oauth.New refuses the development login off a loopback public URL;
	// berth must also listen on loopback only, which only main knows.
	loopback := loopbackAddr(listenAddr) && oauth.DevLoginAllowed(publicURL) == nil
	devLogin := f.devLogin
	if !f.devLoginSet {
		devLogin = loopback && f.oidcIssuer == ""
	} else if devLogin && !loopbackAddr(listenAddr) {
		return authSetup{}, fmt.Errorf("--dev-login lets anyone log in as anyone: it is only allowed when berth listens on, and is reached at, a loopback address (listen %s, public URL %s)", listenAddr, publicURL)
	}
	opts := oauth.Options{
		PublicURL: publicURL, Store: st, Users: svc.Identity, DevLogin: devLogin,
		ResourceDocumentation: docs, Logger: log,
		RegistrationLimit: oauth.RateLimit{PerMinute: f.registrationRate},
	}
	for _, p := range f.trustedProxies {
		prefix, err := parsePrefix(p)
		if err != nil {
			return authSetup{}, fmt.Errorf("--oauth-trusted-proxies: %w", err)
		}
		opts.TrustedProxies = append(opts.TrustedProxies, prefix)
	}
	if f.oidcIssuer != "" {
		secret := ""
		if f.oidcClientSecretFn != "" {
			b, err := os.ReadFile(f.oidcClientSecretFn)
			if err != nil {
				return authSetup{}, fmt.Errorf("--oidc-client-secret-file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		login, err := oidclogin.New(ctx, oidclogin.Config{
			Issuer: f.oidcIssuer, ClientID: f.oidcClientID, ClientSecret: secret, Scopes: f.oidcScopes,
			GroupsClaim: f.oidcGroupsClaim, AllowedDomains: f.oidcDomains,
			RedirectURL: publicURL + "/oauth/login/callback", Key: keys.Derive(serverKey, "berth oidclogin cookie"),
		})
		if err != nil {
			return authSetup{}, err
		}
		opts.Upstream = upstream{login}
		opts.UpstreamName = f.oidcName
		if opts.UpstreamName == "" {
			if u, err := url.Parse(f.oidcIssuer); err == nil {
				opts.UpstreamName = u.Host
			}
		}
	}
	if !devLogin && opts.Upstream == nil {
		// Nobody could log in, so advertising an authorization server
		// would send clients into a dead end: session tokens only.
		setup.middleware.ResourceMetadataURL = nil
		setup.summary = "OAuth: off (no --oidc-issuer, and the development login is for loopback only): session tokens only"
		log.Warn("OAuth login is off: set --oidc-issuer to let MCP clients connect with OAuth")
		return setup, nil
	}
	as, err := oauth.New(opts)
	if err != nil {
		return authSetup{}, err
	}
	setup.middleware.Authenticators = append(setup.middleware.Authenticators, as)
	setup.handler = as.Handler()
	setup.sessions = as.Sessions()
	switch {
	case devLogin && opts.Upstream != nil:
		setup.summary = "OAuth: built-in authorization server, login via " + f.oidcIssuer + " and the DEVELOPMENT login (no password)"
	case devLogin:
		setup.summary = "OAuth: built-in authorization server with the DEVELOPMENT login (no password; loopback only)"
	default:
		setup.summary = "OAuth: built-in authorization server, login via " + f.oidcIssuer
	}
	return setup, nil
}

// parsePrefix reads a CIDR prefix or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor a CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return hostguard.IsLoopback(host)
}

// upstream adapts oidclogin.Login to oauth.Upstream.
type upstream struct{ l *oidclogin.Login }

func (u upstream) Start(w http.ResponseWriter, r *http.Request, state string) { u.l.Start(w, r, state) }

func (u upstream) Finish(w http.ResponseWriter, r *http.Request) (oauth.UpstreamIdentity, string, error) {
	id, state, err := u.l.Finish(w, r)
	return oauth.UpstreamIdentity{Subject: id.Subject, Username: id.Username, Email: id.Email, Name: id.Name, Groups: id.Groups}, state, err
}

// externalUsers resolves the users of external access tokens: created on
// first use, groups refreshed from the token.
type externalUsers struct{ id *orchestrator.Identity }

func (x externalUsers) PrincipalFor(ctx context.Context, username, email string, groups, scopes []string, tokenID string) (rbac.Principal, error) {
	u, _, err := x.id.EnsureUser(ctx, store.NewUser{Username: username, Email: email, Groups: groups})
	if err != nil {
		return rbac.Principal{}, err
	}
	parsed, err := rbac.ParseScopes(scopes)
	if err != nil {
		return rbac.Principal{}, err
	}
	return x.id.PrincipalForUser(ctx, u.ID, parsed, tokenID)
}
