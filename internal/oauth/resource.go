package oauth

import (
	"fmt"
	"net"
	"net/url"
	"strings"
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
