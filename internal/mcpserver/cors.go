package mcpserver

import (
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/wire"
)

// The headers of the CORS answers. Browser MCP clients send the first
// list (Authorization for the bearer token, the two MCP headers, and
// Last-Event-ID when they resume a stream) and must read the second: the
// challenge of a 401 or 403 to find the login, and the MCP headers.
var (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = strings.Join([]string{"Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Berth-Session-Token", "X-Session-ID"}, ", ")
	corsExposeHeaders = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version"
)

// corsMaxAge lets a browser reuse a preflight for ten minutes.
const corsMaxAge = "600"

// cors lets pages on the allowed origins (--allowed-origins and the
// public URL's own) call /mcp from a browser. It sits before
// authentication: a preflight carries no credential, and a 401 must carry
// the CORS headers for the page to read its challenge. It answers
// preflights itself, for allowed Hosts and origins only; every other
// request goes on to next, with the CORS headers set when its Origin is
// allowed. A page of any other origin gets no Access-Control-Allow-Origin,
// so its browser keeps the answer from it (and guard refuses the request
// outright). No cookie authenticates /mcp, so credentials are not allowed.
func cors(o GuardOptions, next http.Handler) http.Handler {
	policy := hostguard.New(o.Hosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Answers differ by Origin, so caches must keep them apart.
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !policy.Allow(w, r) {
				return
			}
			if !policy.AllowsOrigin(origin) {
				wire.WriteError(w, wire.Errorf(wire.CodeForbidden, "Origin %q is not allowed; configure --allowed-origins", origin))
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if origin != "" && policy.AllowsOrigin(origin) {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}
