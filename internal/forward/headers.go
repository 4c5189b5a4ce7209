package forward

import (
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
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
	wire.AgentTokenHeader,
	"Forwarded",
	"X-Real-Ip",
}

// PrepareHeader makes h, the headers of a request to a sandbox's agent,
// safe to send: it removes the caller's credentials for berth and every
// forwarding claim (Forwarded, X-Forwarded-*, X-Real-Ip), which only berth
// may make, and sets the agent token. Every path into a sandbox (the
// streamed forward, Do for berth's own calls and forward_request, the
// RoundTripper of the MCP bridge, the local runtime's build agent) sends
// its headers through here, so the rule is written once.
func PrepareHeader(h http.Header, token string) {
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

// Response headers. Whatever a sandbox answers comes back on berth's own
// origin, where the OAuth browser session is a cookie, and root in the
// sandbox can always answer in its agent's place. So nothing a sandbox
// says may act on that origin: these headers are dropped from every
// response berth relays or stores.
var sandboxOnlyHeaders = []string{
	// Cookies would be stored for berth's origin: a sandbox could set
	// (fixate) or shadow the login session.
	"Set-Cookie",
	"Set-Cookie2",
	// Origin-wide policies only berth may decide: pinning the origin to
	// https for a year, wiping its cookies and storage (a logout),
	// moving its later connections to another host, widening a service
	// worker's scope over berth's paths.
	"Strict-Transport-Security",
	"Public-Key-Pins",
	"Public-Key-Pins-Report-Only",
	"Expect-CT",
	"Clear-Site-Data",
	"Alt-Svc",
	"Service-Worker-Allowed",
	// A redirect after a delay, to anywhere (see sameOriginReference).
	"Refresh",
}

// hopByHopHeaders describe one connection, not the message (RFC 9110
// section 7.6.1); they are never relayed.
var hopByHopHeaders = []string{
	"Connection",
	"Keep-Alive",
	"Proxy-Connection",
	"Proxy-Authenticate",
	"TE",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// sandboxPolicy is the Content-Security-Policy every relayed response
// carries: a document from a sandbox is put in an opaque origin with
// scripts, forms, plugins and popups off, so HTML or SVG it serves never
// runs with berth's origin. It is added to the sandbox's own policies,
// not put in their place, and every policy applies.
const sandboxPolicy = "sandbox"

// SanitizeResponse makes a response from a sandbox safe to relay on
// berth's origin: it drops cookies, origin-wide policies, cross-origin
// grants and hop-by-hop headers (but those a 101 protocol switch needs),
// forbids scripts with a CSP sandbox and content sniffing with nosniff,
// and drops the same headers from trailers when the body has been read.
// Every path that relays or stores a sandbox's answer goes through here.
func SanitizeResponse(resp *http.Response) {
	sanitizeHeader(resp.Header, resp.StatusCode == http.StatusSwitchingProtocols)
	resp.Header.Add("Content-Security-Policy", sandboxPolicy)
	resp.Header.Set("X-Content-Type-Options", "nosniff")
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
		// A 101's body is the raw connection (an io.ReadWriteCloser the
		// proxy needs as is); it has no trailers.
		resp.Body = &trailerFilter{ReadCloser: resp.Body, resp: resp}
	}
}

func sanitizeHeader(h http.Header, switching bool) {
	if h == nil {
		return
	}
	if !switching {
		// The Connection header names more hop-by-hop headers.
		for _, v := range h.Values("Connection") {
			for name := range strings.SplitSeq(v, ",") {
				if name = textproto.TrimString(name); name != "" {
					h.Del(name)
				}
			}
		}
		for _, k := range hopByHopHeaders {
			h.Del(k)
		}
	}
	for _, k := range sandboxOnlyHeaders {
		h.Del(k)
	}
	// A sandbox may redirect within berth's origin, never away from it:
	// berth's origin would vouch for wherever it sent the browser.
	if loc := h.Get("Location"); loc != "" && !sameOriginReference(loc) {
		h.Del("Location")
	}
	for k := range h {
		// CORS grants would let other origins read berth's: berth alone
		// decides that.
		if strings.HasPrefix(k, "Access-Control-") {
			delete(h, k)
		}
	}
}

// trailerFilter drops the sanitized headers from a response's trailers,
// which the transport fills in only when the body reaches its end
// (ReverseProxy reads them after Close).
type trailerFilter struct {
	io.ReadCloser
	resp *http.Response
}

func (t *trailerFilter) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil {
		sanitizeHeader(t.resp.Trailer, false)
	}
	return n, err
}

func (t *trailerFilter) Close() error {
	err := t.ReadCloser.Close()
	sanitizeHeader(t.resp.Trailer, false)
	return err
}

// sameOriginReference reports whether a Location value is a relative
// reference that stays on the origin it is resolved against: no scheme,
// no authority, and none of the backslash or control-character forms
// browsers read as one.
func sameOriginReference(loc string) bool {
	if strings.ContainsAny(loc, "\\\t\r\n") || strings.HasPrefix(loc, "//") {
		return false
	}
	u, err := url.Parse(loc)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}
