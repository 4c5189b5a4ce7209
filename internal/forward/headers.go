package forward

import (
	"net/http"
	"strings"
)

// callerOnlyHeaders carry the caller's credentials for berth itself or
// claims about the caller that only berth may make. None of them may reach
// the agent: the agent trusts its own bearer token, which is injected in
// their place.
var callerOnlyHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"Cookie",
	"Berth-Session-Token",
	"Forwarded",
	"X-Real-Ip",
}

// prepareHeader removes the caller's credentials and forwarding claims from
// h and sets the agent token.
//
// Response headers are passed back untouched, Set-Cookie included. Code in
// a sandbox can therefore set cookies that a browser stores for berth's
// origin. That is harmless while berth authenticates only with bearer
// tokens and the Berth-Session-Token header, never cookies; the day it
// uses a cookie, the orchestrator must strip Set-Cookie from forwarded
// responses.
func prepareHeader(h http.Header, token string) {
	for _, k := range callerOnlyHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "X-Forwarded-") {
			delete(h, k)
		}
	}
	h.Set("Authorization", "Bearer "+token)
}
