package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// requireToken lets a request through only with `Authorization: Bearer
// <token>`, or the token in wire.AgentTokenHeader (through a Kubernetes
// API server's pod proxy, which keeps Authorization for itself). Both sides are hashed before the constant-time comparison so
// that neither the content nor the length of the token leaks through
// timing.
func (a *Agent) requireToken(next http.Handler) http.Handler {
	if a.cfg.InsecureNoAuth {
		return next
	}
	want := sha256.Sum256([]byte(a.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			got = r.Header.Get(wire.AgentTokenHeader)
			ok = got != ""
		}
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth-agent"`)
			msg := "missing bearer token"
			if ok || r.Header.Get("Authorization") != "" {
				msg = "invalid bearer token"
			}
			encode(w, http.StatusUnauthorized, wire.Error{Error: wire.ErrorDetail{Code: wire.CodeUnauthorized, Message: msg}})
			return
		}
		next.ServeHTTP(w, r)
	})
}
