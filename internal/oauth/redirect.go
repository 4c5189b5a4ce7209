package oauth

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/hostguard"
)

const (
	maxRedirectURIs     = 20
	maxRedirectURILen   = 2000
	maxClientNameLen    = 200
	maxPlainMetadataLen = 2000
)

// forbiddenSchemes can never receive an authorization response: they run
// code in the browser, read local files or are not navigations at all.
var forbiddenSchemes = []string{
	"javascript", "data", "file", "vbscript", "about", "blob", "filesystem",
	"view-source", "jar", "ws", "wss", "ftp", "mailto", "tel", "sms",
	"chrome", "chrome-extension", "resource", "intent",
}

// validateRedirectURI checks a redirect URI a client registers: https, http
// only on a loopback host (RFC 8252 7.3), or a private-use scheme (RFC 8252
// 7.1, e.g. vscode://) that is not one of forbiddenSchemes. No fragment,
// no user information, no control characters.
func validateRedirectURI(raw string) error {
	if raw == "" {
		return fmt.Errorf("redirect URI is empty")
	}
	if len(raw) > maxRedirectURILen {
		return fmt.Errorf("redirect URI is longer than %d characters", maxRedirectURILen)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return r < 0x21 || r == 0x7f }) >= 0 {
		return fmt.Errorf("redirect URI %q contains spaces or control characters", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("redirect URI %q does not parse: %v", raw, err)
	}
	if u.Scheme == "" {
		return fmt.Errorf("redirect URI %q is not absolute", raw)
	}
	if strings.Contains(raw, "#") {
		return fmt.Errorf("redirect URI %q must not have a fragment", raw)
	}
	if u.User != nil {
		return fmt.Errorf("redirect URI %q must not carry user information", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "https":
		if u.Host == "" || u.Hostname() == "" {
			return fmt.Errorf("redirect URI %q has no host", raw)
		}
	case scheme == "http":
		if !hostguard.IsLoopback(u.Hostname()) {
			return fmt.Errorf("redirect URI %q: http is allowed only for loopback hosts (127.0.0.1, [::1], localhost); use https", raw)
		}
	case slices.Contains(forbiddenSchemes, scheme):
		return fmt.Errorf("redirect URI %q: scheme %q is not allowed", raw, scheme)
	default:
		// A private-use scheme for a native app; it must still be a
		// navigation target, which an opaque "scheme:foo" is not.
		if u.Opaque != "" {
			return fmt.Errorf("redirect URI %q: a private-use scheme needs the form %s:/path or %s://host/path", raw, scheme, scheme)
		}
	}
	return nil
}

// redirectMatches reports whether requested is one of registered: exact
// string comparison, except that a loopback http redirect URI matches with
// any port (RFC 8252 7.3), since native apps listen on an ephemeral port.
func redirectMatches(registered []string, requested string) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	req, err := url.Parse(requested)
	if err != nil || req.Scheme != "http" || !hostguard.IsLoopback(req.Hostname()) || req.Fragment != "" || req.User != nil {
		return false
	}
	for _, r := range registered {
		reg, err := url.Parse(r)
		if err != nil || reg.Scheme != "http" || !hostguard.IsLoopback(reg.Hostname()) {
			continue
		}
		if reg.Hostname() == req.Hostname() && reg.EscapedPath() == req.EscapedPath() && reg.RawQuery == req.RawQuery {
			return true
		}
	}
	return false
}
