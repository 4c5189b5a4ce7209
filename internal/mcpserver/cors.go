package mcpserver

import (
	"net/http"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/wire"
)

// The headers of the CORS answers. Browser MCP clients send the first
// list: Authorization for the bearer token (or berth's own
// Berth-Session-Token), Mcp-Session-Id and Mcp-Protocol-Version
// (2025-03-26 on), Mcp-Method and Mcp-Name (2026-07-28 mirrors the
// method and the tool, resource or prompt name into them, and berth
// checks them on task requests), Last-Event-ID when they resume a stream,
// and X-Session-ID for bash sessions. A 2026-07-28 client also sends
// Mcp-Param-<name> for tool arguments whose schema says x-mcp-header;
// those are allowed when a preflight asks for them (corsParamHeaders).
// Clients must read the second list: the challenge of a 401 or 403 to
// find the login or step up, the MCP headers, and Retry-After of a 429 or
// 503 to know when to try again.
var (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = []string{"Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-ID", "Berth-Session-Token", "X-Session-ID"}
	corsExposeHeaders = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After"
)

// mcpParamPrefix starts the headers that mirror tool arguments (SEP-2243).
const mcpParamPrefix = "mcp-param-"

// Bounds on the Mcp-Param-* headers a preflight may have allowed: a
// tool has a handful of arguments, and the answer must stay small.
const (
	maxParamHeaders   = 16
	maxParamHeaderLen = 64
)

// corsParamHeaders returns the Mcp-Param-* names among the headers a
// preflight asks for (Access-Control-Request-Headers, comma-separated),
// so that the answer allows them as well as the fixed list. Only
// well-formed names, and a bounded number of them, are echoed back.
func corsParamHeaders(requested string) []string {
	var out []string
	for _, name := range strings.Split(requested, ",") {
		name = strings.TrimSpace(name)
		if len(out) == maxParamHeaders {
			break
		}
		if len(name) <= len(mcpParamPrefix) || len(name) > maxParamHeaderLen ||
			!strings.HasPrefix(strings.ToLower(name), mcpParamPrefix) || !isToken(name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// isToken reports whether s is an HTTP field name (RFC 9110 tchar).
func isToken(s string) bool {
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

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
			allow := append(slices.Clip(corsAllowHeaders), corsParamHeaders(r.Header.Get("Access-Control-Request-Headers"))...)
			h.Set("Access-Control-Allow-Headers", strings.Join(allow, ", "))
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
