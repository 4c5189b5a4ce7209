package mcpserver

import (
	"mime"
	"net/http"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/wire"
)

// GuardOptions configure the transport protections of /mcp.
type GuardOptions struct {
	// Hosts are the Host values and browser origins /mcp answers to. The
	// REST API checks the same Host allow-list in front of every route;
	// /mcp checks it again so that its handler is safe on its own too.
	Hosts hostguard.Options
	// MaxBodyBytes limits request bodies (0 = 4 MiB, or what the
	// largest inline archive upload needs when that is more).
	MaxBodyBytes int64
}

func (o GuardOptions) maxBody() int64 {
	if o.MaxBodyBytes <= 0 {
		return 4 << 20
	}
	return o.MaxBodyBytes
}

// guard enforces, in order: the Host header is one berth answers to (DNS
// rebinding -> 403), a browser Origin is allowed (-> 403), POST bodies are
// JSON (-> 415), and bodies are bounded (-> 413).
func guard(o GuardOptions, next http.Handler) http.Handler {
	policy := hostguard.New(o.Hosts)
	limit := o.maxBody()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !policy.Allow(w, r) {
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !policy.AllowsOrigin(origin) {
			wire.WriteError(w, wire.Errorf(wire.CodeForbidden, "Origin %q is not allowed; configure --allowed-origins", origin))
			return
		}
		if r.Method == http.MethodPost {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				wire.WriteError(w, wire.Errorf(wire.CodeUnsupportedMedia, "Content-Type must be application/json, got %q", r.Header.Get("Content-Type")))
				return
			}
			if r.ContentLength > limit {
				wire.WriteError(w, wire.Errorf(wire.CodeTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
