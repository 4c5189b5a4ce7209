// Package mcpserver is berth's MCP surface: the streamable-HTTP endpoint
// at /mcp (stateless, so any replica answers any request) with every
// operation of the catalogue (internal/catalog) as a tool, the prompts,
// and MCP tasks over the durable operations. Tools call the same service
// methods the REST API calls, decoding their input the same way; this
// package decides nothing about who may do what.
package mcpserver

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/version"
)

// Options configure the MCP endpoint.
type Options struct {
	// Auth is the same authentication the REST API uses; its options also
	// shape the 403 insufficient_scope challenge.
	Auth auth.MiddlewareOptions
	// Guard configures the transport protections (Host, Origin,
	// Content-Type, body size).
	Guard GuardOptions
	// Tool, when set, is around each tool call, bound by tool name
	// (metrics, traces).
	Tool   observe.Hook
	Logger *slog.Logger
}

// Server is the MCP endpoint.
type Server struct {
	svc   *orchestrator.Service
	opts  Options
	mcp   *mcp.Server
	tools map[string]catalog.Op // tool name -> its operation, for the scope pre-check
	// cancel is cancel_operation, which tasks/cancel performs.
	cancel catalog.Op
	// taskOps are the tools that may run as MCP tasks (tasks.go).
	taskOps map[string]catalog.Op
	// toolStarts observe each tool's calls (Options.Tool), bound once.
	toolStarts map[string]observe.Start
	// initAmend and listAmend declare tasks in the SDK's initialize and
	// tools/list answers (tasksamend.go), each amended once per distinct
	// answer.
	initAmend, listAmend *amendCache
}

const instructions = `berth gives you development sandboxes. Typical flow: register_client, then start_server (pass wait_seconds to get the result inline), then run commands with bash (a persistent shell per session) or run_bash_command (one-shot), read and change files with read_file, write_file, edit_file, patch_file and list_files, and finally finish_server (keep it for reuse) or stop_server. Long calls return an operation; get_operation_status with wait_seconds waits for it. whoami tells your roles and scopes.`

// New builds the MCP server with every tool and prompt.
func New(svc *orchestrator.Service, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Guard.MaxBodyBytes <= 0 {
		opts.Guard.MaxBodyBytes = max(4<<20, svc.InlineArchiveRequestBytes())
	}
	s := &Server{
		svc:        svc,
		opts:       opts,
		tools:      map[string]catalog.Op{},
		taskOps:    map[string]catalog.Op{},
		toolStarts: map[string]observe.Start{},
		mcp: mcp.NewServer(&mcp.Implementation{Name: "berth", Title: "berth sandboxes", Version: version.Version},
			&mcp.ServerOptions{Instructions: instructions, Logger: sdkLogger(opts.Logger), Capabilities: extensionCapabilities()}),
	}
	s.mcp.AddReceivingMiddleware(answerOnlyAdvertised)
	cat := catalog.New(svc)
	s.cancel, _ = cat.Op("cancel_operation")
	for _, o := range cat.Ops() {
		if !o.NoMCP {
			s.addOperation(o)
			if taskable(o) {
				s.taskOps[o.Tool()] = o
			}
		}
	}
	s.addPrompts()
	s.initAmend, s.listAmend = newAmendCache(declareTasks), newAmendCache(s.markTaskTools)
	return s
}

// Handler returns /mcp: CORS for browser pages on allowed origins, then
// authentication, then the transport guards, then the scope pre-check,
// then the go-sdk handler (stateless, JSON responses).
func (s *Server) Handler() http.Handler {
	handler := func(jsonResponse bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
			Stateless:    true,
			JSONResponse: jsonResponse,
			Logger:       sdkLogger(s.opts.Logger),
			// berth checks Host against an allow-list itself (guard.go),
			// which also works behind a reverse proxy on loopback; the
			// SDK's loopback-only rule would refuse such a proxy's public
			// Host.
			DisableLocalhostProtection: true,
			MaxRequestBodyBytes:        s.opts.Guard.maxBody(),
		})
	}
	// Plain JSON answers, except for calls that ask for progress: those
	// get an event stream so notifications/progress can reach the caller
	// before the result.
	var h http.Handler = s.scopeCheck(handler(true), handler(false))
	h = withSession(h)
	h = guard(s.opts.Guard, h)
	h = auth.Middleware(s.opts.Auth)(h)
	return cors(s.opts.Guard, h)
}

// principal is the caller of a tool; the auth middleware put it in the
// request context, which the SDK hands to tool handlers.
func principal(ctx context.Context) rbac.Principal {
	p, _ := auth.PrincipalFrom(ctx)
	return p
}

// withSession hands the session a request's X-Session-ID header names to
// the tools (bash without a server runs in that session's sandbox).
func withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(catalog.SessionHeader); v != "" {
			r = r.WithContext(catalog.WithSession(r.Context(), v))
		}
		next.ServeHTTP(w, r)
	})
}
