package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// route is one REST route outside the catalogue and what the OpenAPI
// document says about it. The router and the document are both built
// from the catalogue, publicRoutes() and rawRoutes(), so a route cannot
// exist undocumented.
type route struct {
	method, pattern string
	summary         string
	request         any // zero value of the JSON body type; nil = no body
	response        any // zero value of the JSON answer type; nil = not JSON
	query           []string
	handler         http.Handler
}

// anyMethod marks a route that takes every method in forward.Methods.
const anyMethod = "*"

// methods expands a route's method into the methods it serves.
func (rt route) methods() []string {
	if rt.method == anyMethod {
		return forward.Methods
	}
	return []string{rt.method}
}

// publicRoutes need no credential.
func (s *server) publicRoutes() []route {
	return []route{
		{"GET", "/healthz", "Liveness: the process answers", nil, wire.Health{}, nil, s.healthz()},
		{"GET", "/readyz", "Readiness: the database answers; names the runtime and, on the local runtime, the data directory's free space", nil, readyResponse{}, nil, s.readyz()},
		{"GET", "/api/openapi.json", "This OpenAPI document", nil, nil, nil, http.HandlerFunc(s.serveOpenAPI)},
	}
}

// rawRoutes need a credential and are not operations of the catalogue:
// they stream HTTP into a sandbox.
func (s *server) rawRoutes() []route {
	return []route{
		{anyMethod, "/api/forward/{client_id}/{server_id}/*", "Forward an HTTP request to the server's agent (streamed)", nil, nil, nil, s.forward()},
		{"GET", "/api/ws-forward/{client_id}/{server_id}/*", "Forward a WebSocket connection to the server's agent", nil, nil, nil, s.forward()},
		{"GET", "/api/servers/{server_id}/archive", "Download a tar of a workspace path (query path; streamed, application/x-tar). The Berth-Archive-Limit header gives the most an archive may hold; one larger is cut after exactly that many bytes and the connection aborted, never ended as a whole archive", nil, nil, []string{"path"}, s.downloadArchive()},
		{"POST", "/api/servers/{server_id}/exec/stream", "Run a one-shot command and stream its output as it is written (application/x-ndjson): {stream, data} events, stdout and stderr each capped at max_output_bytes keeping head and tail, then a final {exit_code, timed_out, truncated, ...} or {error}", orchestrator.StreamBashRequest{}, nil, nil, s.execStream()},
		{"PUT", "/api/servers/{server_id}/archive", "Extract the tar (or gzip-compressed tar) in the body into a workspace directory (query path)", nil, orchestrator.ArchiveResult{}, []string{"path"}, s.uploadArchive()},
	}
}

func (s *server) router() *chi.Mux {
	r := chi.NewRouter()
	// Outermost, so that what the Host check refuses is seen too.
	r.Use(observe.Middleware(s.opts.Observe...))
	// Before everything, unknown paths and 405s included: a rebound name
	// must not reach OAuth, the API or even learn which routes exist. The
	// health probes answer any Host: Kubernetes probes send the pod's IP.
	r.Use(hostguard.New(s.opts.Hosts).Middleware("/healthz", "/readyz"))
	for _, rt := range s.publicRoutes() {
		r.Method(rt.method, rt.pattern, rt.handler)
	}
	if s.opts.MCP != nil {
		// /mcp brings its own authentication and transport guards.
		r.Handle("/mcp", s.opts.MCP)
	}
	if s.opts.OAuth != nil {
		for _, prefix := range []string{"/.well-known/*", "/oauth/*", "/account/*"} {
			r.Handle(prefix, s.opts.OAuth)
		}
	}
	r.Group(func(r chi.Router) {
		r.Use(auth.Middleware(s.opts.Auth))
		for _, o := range s.cat.Ops() {
			if o.REST.Method != "" {
				r.Method(o.REST.Method, o.REST.Path, s.operation(o))
			}
		}
		for _, rt := range s.rawRoutes() {
			for _, m := range rt.methods() {
				r.Method(m, rt.pattern, rt.handler)
			}
		}
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Console != nil && r.URL.Path != "/api" && !strings.HasPrefix(r.URL.Path, "/api/") {
			s.opts.Console.ServeHTTP(w, r)
			return
		}
		wire.WriteError(w, wire.Errorf(wire.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	mux := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		allowed := allowedMethods(mux, r.URL.Path)
		// RFC 9110 section 15.5.6: a 405 names the methods that would work.
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		wire.WriteJSON(w, http.StatusMethodNotAllowed, wire.Error{Error: wire.ErrorDetail{Code: "method_not_allowed",
			Message: fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or "))}})
	})
	return r
}

// allowedMethods lists the methods the router serves at path.
func allowedMethods(mux *chi.Mux, path string) []string {
	var out []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		if mux.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return out
}
