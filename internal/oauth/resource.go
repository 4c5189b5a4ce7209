package oauth

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/hostguard"
)

// normalizeURL returns the canonical form of an absolute http(s) URL used
// as an issuer or resource indicator (RFC 8707): lower-case scheme and
// host, no default port, no trailing slash, no fragment. Two resource
// values name the same resource when their normal forms are equal.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	if !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", fmt.Errorf("%q must not have a fragment", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q must not carry user information", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("%q: scheme must be https or http", raw)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	out := scheme + "://" + hostport + path
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, nil
}

// A berth on loopback answers to every loopback name: a client told
// http://127.0.0.1:8080 may well connect to http://localhost:8080. The
// MCP authorization spec has the client check that the protected resource
// metadata names the URL it connected to, so for loopback servers the
// metadata, the challenges and the resource indicators follow the name
// the client used, and tokens are bound to the canonical public URL.

// requestBase is the base URL to show a client: the public base, or for a
// loopback public URL the same scheme and port under the loopback name the
// request used.
func requestBase(publicBase string, r *http.Request) string {
	if alias, ok := loopbackAlias(publicBase, r.Host); ok {
		return alias
	}
	return publicBase
}

// loopbackAlias returns publicBase under hostport when publicBase is on
// loopback and hostport names loopback with the same port.
func loopbackAlias(publicBase, hostport string) (string, bool) {
	u, err := url.Parse(publicBase)
	if err != nil || !hostguard.IsLoopback(u.Hostname()) {
		return "", false
	}
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		h, port = hostport, ""
	}
	if port != u.Port() || !hostguard.IsLoopback(strings.Trim(h, "[]")) {
		return "", false
	}
	return u.Scheme + "://" + strings.ToLower(hostport), true
}

// canonicalResource maps a normalized resource under a loopback alias of
// publicBase to the same resource under publicBase.
func canonicalResource(publicBase, resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return resource
	}
	if alias, ok := loopbackAlias(publicBase, u.Host); ok && strings.HasPrefix(resource, alias) {
		return publicBase + strings.TrimPrefix(resource, alias)
	}
	return resource
}
