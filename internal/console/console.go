package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
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
	// StreamWriteTimeout bounds each write to a live page's event
	// stream: a browser that reads nothing for this long is dropped
	// (default 10 s).
	StreamWriteTimeout time.Duration
	Logger             *slog.Logger
}

// Console serves the console's pages.
type Console struct {
	opts Options
	svc  *orchestrator.Service
	// cat offers the catalogue's operations (Op.Call) to pages that call
	// one by name rather than a Service method.
	cat     *catalog.Catalog
	pages   *web.Pages
	log     *slog.Logger
	handler http.Handler
	// closing ends the live pages' streams (Shutdown).
	closing   chan struct{}
	closeOnce sync.Once
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
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = defaultStreamWriteTimeout
	}
	pages, err := web.New()
	if err != nil {
		return nil, err
	}
	c := &Console{opts: opts, svc: opts.Service, cat: catalog.New(opts.Service), pages: pages, log: opts.Logger,
		closing: make(chan struct{})}
	c.handler = c.routes()
	return c, nil
}

// Handler serves the console. berth mounts it for every path that is not
// the REST API's, /mcp or the OAuth pages', so unknown paths get the
// console's 404 page.
func (c *Console) Handler() http.Handler { return c.handler }

// Shutdown ends the live pages' event streams, which never go idle, so a
// server shutting down need not wait for them (http.Server's
// RegisterOnShutdown); browsers reconnect to another replica.
func (c *Console) Shutdown() { c.closeOnce.Do(func() { close(c.closing) }) }

// routes are the console's pages. A page is a pageFunc wrapped in
// signedIn (GET) or form (POST); public ones take the browser as it is.
func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", web.Static())
	mux.HandleFunc("GET /{$}", c.visit(c.home))
	mux.HandleFunc("GET /servers", c.signedIn(c.serversPage))
	mux.HandleFunc("POST /servers", c.form(c.startServer))
	mux.HandleFunc("GET /servers/events", c.signedIn(c.stream(c.svc.WatchServers, c.serversLive)))
	mux.HandleFunc("GET /servers/{id}", c.signedIn(c.serverPage))
	mux.HandleFunc("GET /servers/{id}/events", c.signedIn(func(w http.ResponseWriter, r *http.Request, v *Visit) {
		id := r.PathValue("id")
		watch := func(ctx context.Context, p rbac.Principal) (<-chan struct{}, func(), error) {
			return c.svc.WatchServer(ctx, p, id)
		}
		c.stream(watch, c.serverLive(id))(w, r, v)
	}))
	mux.HandleFunc("POST /servers/{id}/bash", c.form(c.runCommand))
	mux.HandleFunc("POST /servers/{id}/network", c.form(c.setNetwork))
	for _, action := range []string{"stop", "finish", "restart"} {
		mux.HandleFunc("POST /servers/{id}/"+action, c.form(c.serverAction(action)))
	}
	mux.HandleFunc("GET /operations", c.signedIn(c.operationsPage))
	c.tokenRoutes(mux)
	c.adminRoutes(mux)
	mux.HandleFunc("/", c.visit(c.notFound))
	return mux
}
