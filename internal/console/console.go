package console

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/websession"
	"github.com/berth-mcp/berth/web"
)

// Options configure the console.
type Options struct {
	Service *orchestrator.Service
	// Sessions are the browser sessions of the OAuth login pages; nil
	// when this berth has no browser sign-in (the pages then say so).
	Sessions *websession.Sessions
	// SignOutPurpose is the CSRF purpose of the sign-out form that the
	// navigation posts to /oauth/logout (oauth.SignOutPurpose).
	SignOutPurpose string
	// PublicURL is the URL clients reach berth at, without a trailing
	// slash: the start page shows PublicURL + "/mcp".
	PublicURL string
	Logger    *slog.Logger
}

// Console serves the console's pages.
type Console struct {
	opts    Options
	svc     *orchestrator.Service
	cat     *catalog.Catalog
	pages   *web.Pages
	log     *slog.Logger
	handler http.Handler
}

// New returns the console.
func New(opts Options) (*Console, error) {
	if opts.Service == nil {
		return nil, errors.New("console: Service is required")
	}
	if opts.Sessions != nil && opts.SignOutPurpose == "" {
		return nil, errors.New("console: SignOutPurpose is required with Sessions")
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := web.New()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, svc: opts.Service, cat: catalog.New(opts.Service), pages: pages, log: opts.Logger}
	c.handler = c.routes()
	return c, nil
}

// Handler serves the console. berth mounts it for every path that is not
// the REST API's, /mcp or the OAuth pages', so unknown paths get the
// console's 404 page.
func (c *Console) Handler() http.Handler { return c.handler }

// routes are the console's pages. A page is a pageFunc wrapped in
// signedIn (GET) or form (POST); public ones take the browser as it is.
func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", web.Static())
	mux.HandleFunc("GET /{$}", c.visit(c.home))
	c.tokenRoutes(mux)
	c.adminRoutes(mux)
	mux.HandleFunc("/", c.visit(c.notFound))
	return mux
}
