// Package api is berth's REST adapter: a chi route under /api for each
// operation of the catalogue (internal/catalog), whose input it takes
// from the path, the query and the JSON body, plus the streams that are
// not operations (the forward proxy, WebSocket, archives), the health
// probes and the OpenAPI document built from the same table. It holds no
// rules of its own; authentication is the auth middleware's and every
// decision is the service's.
package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Options configure the REST API.
type Options struct {
	// Auth configures authentication; its Authenticators must be set.
	Auth auth.MiddlewareOptions
	// Hosts are the Host header values berth answers to, checked before
	// every route but the health probes (DNS rebinding protection). An
	// empty public URL with no allowed hosts refuses every request.
	Hosts hostguard.Options
	// MaxBodyBytes limits JSON request bodies (0 = 4 MiB). Forwarded
	// bodies are streamed and not limited here.
	MaxBodyBytes int64
	// MCP is the MCP endpoint mounted at /mcp (it brings its own
	// authentication and transport guards); nil leaves /mcp unrouted.
	MCP http.Handler
	// OAuth serves the authorization server and its pages: it is mounted
	// at /.well-known/*, /oauth/* and /account/* without the auth
	// middleware (it authenticates its own way); nil leaves them unrouted.
	OAuth http.Handler
	// Console serves the web console: every path no other route has,
	// but those under /api/ (which keep their JSON 404), so / and the
	// console's pages are its own and unknown paths get its 404 page;
	// nil leaves them JSON 404s.
	Console http.Handler
	// Observe sees every request, refused ones included, once it was
	// routed (metrics, traces, the access log); each response gets an
	// X-Request-Id.
	Observe []observe.HTTPObserver
	Logger  *slog.Logger
}

type server struct {
	svc  *orchestrator.Service
	cat  *catalog.Catalog
	opts Options
	log  *slog.Logger
	// openAPI is the OpenAPI document, built once from the route table.
	openAPI    []byte
	openAPIErr error
}

// NewServer returns the REST API (routes under /api, plus /healthz and
// /readyz) with /mcp and the OAuth routes mounted, all behind the Host
// check.
func NewServer(svc *orchestrator.Service, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{svc: svc, cat: catalog.New(svc), opts: opts, log: opts.Logger}
	s.openAPI, s.openAPIErr = s.buildOpenAPI()
	return s.router()
}

// principal is the authenticated caller; the auth middleware guarantees
// one on every /api route.
func principal(r *http.Request) rbac.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

// fail answers with the error: a missing scope gets the RFC 6750
// insufficient_scope challenge, an unavailable server (or database) a 503
// with Retry-After.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var denied *rbac.Denied
	if errors.As(err, &denied) {
		auth.WriteDenied(w, r, s.opts.Auth, err)
		return
	}
	if err = store.Classify(err); errors.Is(err, store.ErrUnavailable) {
		// The driver's details are for the log, not the caller.
		s.log.Error("database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		wire.WriteError(w, wire.Errorf(wire.CodeUnavailable, "%s", store.UnavailableMessage))
		return
	}
	// A sandbox that answered nonsense (502) or nothing in time (504) is
	// not a failure of berth's own.
	if status := wire.WriteError(w, err); status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusBadGateway &&
		status != http.StatusGatewayTimeout {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}
