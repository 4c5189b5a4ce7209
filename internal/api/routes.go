package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// route is one REST route and what the OpenAPI document says about it.
// The router and the document are both built from routes() and
// publicRoutes(), so a route cannot exist undocumented.
type route struct {
	method, pattern string
	summary         string
	request         any // zero value of the JSON body type; nil = no body
	response        any // zero value of the JSON answer type; nil = not JSON
	query           []string
	handler         http.Handler
}

// anyMethod marks a route that takes every method in forwardMethods.
const anyMethod = "*"

// forwardMethods are the methods forwarded into a sandbox. CONNECT and
// TRACE are left out on purpose: a reverse proxy has no use for the one,
// and the other would echo the caller's headers back.
var forwardMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// methods expands a route's method into the methods it serves.
func (rt route) methods() []string {
	if rt.method == anyMethod {
		return forwardMethods
	}
	return []string{rt.method}
}

// publicRoutes need no credential.
func (s *server) publicRoutes() []route {
	return []route{
		{"GET", "/healthz", "Liveness: the process answers", nil, wire.Health{}, nil, s.healthz()},
		{"GET", "/readyz", "Readiness: the database answers; names the runtime", nil, readyResponse{}, nil, s.readyz()},
		{"GET", "/api/openapi.json", "This OpenAPI document", nil, nil, nil, http.HandlerFunc(s.serveOpenAPI)},
	}
}

// routes need a credential; the auth middleware runs before each.
func (s *server) routes() []route {
	return []route{
		{"GET", "/api/whoami", "The caller: user, roles, scopes, namespaces", nil, orchestrator.Whoami{}, nil, s.whoami()},

		{"POST", "/api/clients", "Register a client", orchestrator.RegisterClientRequest{}, orchestrator.Client{}, nil, s.registerClient()},
		{"GET", "/api/clients", "List the caller's clients", nil, []orchestrator.Client{}, nil, s.listClients()},
		{"GET", "/api/clients/{id}", "Get a client", nil, orchestrator.Client{}, nil, s.getClient()},
		{"POST", "/api/clients/{id}/heartbeat", "Keep a client and its servers from being reaped", nil, orchestrator.Client{}, nil, s.heartbeatClient()},
		{"POST", "/api/clients/{id}/finish", "Mark a client and its servers reusable", nil, orchestrator.Client{}, nil, s.finishClient()},
		{"DELETE", "/api/clients/{id}", "Stop a client and delete its servers", nil, orchestrator.Client{}, nil, s.stopClient()},

		{"POST", "/api/servers", "Start a server (returns an operation; wait_seconds waits for it)", orchestrator.StartServerRequest{}, orchestrator.Operation{}, nil, s.startServer()},
		{"GET", "/api/servers", "List the caller's servers", nil, []orchestrator.Server{}, []string{"client_id"}, s.listServers()},
		{"GET", "/api/servers/{id}", "Get a server (with its sandbox's recent events on Kubernetes)", nil, orchestrator.ServerDetail{}, nil, s.getServer()},
		{"POST", "/api/servers/{id}/finish", "Mark a server reusable without deleting it", nil, orchestrator.Server{}, nil, s.finishServer()},
		{"POST", "/api/servers/{id}/restart", "Restart a server with a fresh filesystem (returns an operation)", optionalBody{waitRequest{}}, orchestrator.Operation{}, nil, s.restartServer()},
		{"DELETE", "/api/servers/{id}", "Stop a server and delete its sandbox", nil, orchestrator.Server{}, nil, s.stopServer()},
		{"GET", "/api/servers/{id}/logs", "The last lines of the server's agent log", nil, logsResponse{}, []string{"tail"}, s.serverLogs()},
		{"POST", "/api/servers/{id}/bash", "Run a one-shot bash command (returns an operation; wait_seconds waits for it)", orchestrator.RunBashRequest{}, orchestrator.Operation{}, nil, s.runBash()},
		{"POST", "/api/servers/{id}/sessions/{session}/exec", "Run a command in a persistent shell session", wire.SessionExecRequest{}, wire.BashResult{}, nil, s.sessionExec()},

		{"GET", "/api/servers/{id}/operations", "The server's latest operations, newest first", nil, []orchestrator.Operation{}, []string{"limit"}, s.serverOperations()},
		{"GET", "/api/servers/{id}/files", "List a directory of the server's workspace", nil, wire.ListResult{}, []string{"path", "recursive"}, s.listFiles()},
		{"GET", "/api/servers/{id}/files/content", "Read lines of a file in the server's workspace", nil, wire.ReadResult{}, []string{"path", "offset", "limit"}, s.readFile()},
		{"POST", "/api/servers/{id}/files/write", "Write a whole file atomically", wire.WriteFileRequest{}, wire.FileResult{}, nil, s.writeFile()},
		{"POST", "/api/servers/{id}/files/create", "Create a file (refuses to overwrite unless overwrite is true)", wire.CreateFileRequest{}, wire.FileResult{}, nil, s.createFile()},
		{"POST", "/api/servers/{id}/files/edit", "Replace a line range of a file", wire.EditFileRequest{}, wire.FileResult{}, nil, s.editFile()},
		{"POST", "/api/servers/{id}/files/patch", "Apply a unified diff to a file", wire.PatchFileRequest{}, wire.FileResult{}, nil, s.patchFile()},
		{"GET", "/api/servers/{id}/mcp/tools", "List the server's MCP tools (built-in and proxied upstreams)", nil, orchestrator.ServerTools{}, nil, s.listServerTools()},
		{"POST", "/api/servers/{id}/mcp/call", "Call one of the server's MCP tools", serverToolCall{}, orchestrator.ServerToolResult{}, nil, s.callServerTool()},
		{"POST", "/api/forward-request", "Send one HTTP request to a server's agent and get its status, headers and body as JSON", orchestrator.ForwardRequest{}, orchestrator.ForwardedResponse{}, nil, s.forwardRequest()},

		{"POST", "/api/images/build", "Build images from image-builder YAML; one build job per image", orchestrator.BuildImagesRequest{}, orchestrator.BuildImagesResult{}, nil, s.buildImages()},
		{"GET", "/api/jobs/{name}", "Status of an image build job; wait_seconds waits for it to finish", nil, orchestrator.BuildJob{}, []string{"wait_seconds"}, s.jobStatus()},

		{"GET", "/api/operations/{id}", "Get an operation; wait_seconds waits for it to finish", nil, orchestrator.Operation{}, []string{"wait_seconds"}, s.getOperation()},

		{anyMethod, "/api/forward/{client_id}/{server_id}/*", "Forward an HTTP request to the server's agent (streamed)", nil, nil, nil, s.forward()},
		{"GET", "/api/ws-forward/{client_id}/{server_id}/*", "Forward a WebSocket connection to the server's agent", nil, nil, nil, s.forward()},
	}
}

func (s *server) router() *chi.Mux {
	r := chi.NewRouter()
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
		for _, rt := range s.routes() {
			for _, m := range rt.methods() {
				r.Method(m, rt.pattern, rt.handler)
			}
		}
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
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
