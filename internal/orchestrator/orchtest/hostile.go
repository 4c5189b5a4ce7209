package orchtest

import (
	"net/http"
	"strings"
)

// hostileHeaders are headers a sandbox answers to act on berth's origin:
// none may reach a caller of berth.
var hostileHeaders = map[string]string{
	"Set-Cookie":                  "__Host-berth_session=fixed; Path=/; Secure",
	"Set-Cookie2":                 "old=1",
	"Strict-Transport-Security":   "max-age=31536000",
	"Clear-Site-Data":             `"cookies"`,
	"Alt-Svc":                     `h2="evil.example:443"`,
	"Access-Control-Allow-Origin": "https://evil.example",
}

// WithHostileHeaders wraps h so that every answer it gives carries cookies
// for berth's origin and origin-wide policies, as a sandbox that took
// over its agent can answer.
func WithHostileHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hostileHeaders {
			w.Header().Set(k, v)
		}
		h.ServeHTTP(w, r)
	})
}

// Unsanitized names what is wrong with headers berth relayed from an
// answer of WithHostileHeaders: every hostile header that got through,
// and berth's Content-Security-Policy sandbox and nosniff when missing.
// Empty means safe.
func Unsanitized(h http.Header) []string {
	var bad []string
	for k := range hostileHeaders {
		if v := h.Values(k); len(v) > 0 {
			bad = append(bad, k+": "+strings.Join(v, ", "))
		}
	}
	sandboxed := false
	for _, v := range h.Values("Content-Security-Policy") {
		for p := range strings.SplitSeq(v, ",") {
			sandboxed = sandboxed || strings.TrimSpace(p) == "sandbox"
		}
	}
	if !sandboxed {
		bad = append(bad, "no Content-Security-Policy: sandbox")
	}
	if h.Get("X-Content-Type-Options") != "nosniff" {
		bad = append(bad, "no X-Content-Type-Options: nosniff")
	}
	return bad
}

// Header turns headers stored as a map (a ForwardedResponse's) back into
// an http.Header.
func Header(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}
