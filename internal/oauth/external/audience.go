package external

import (
	"net/url"
	"strings"
)

// NormalizeAudience returns the form of a resource URL that audience
// checks compare: scheme and host lower-cased, the default port dropped,
// and no trailing slash, so "https://Berth.example.com:443/" matches
// "https://berth.example.com". Values that are not absolute URLs are
// only trimmed.
func NormalizeAudience(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return s
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		u.Host = u.Hostname()
		if strings.Contains(u.Host, ":") {
			u.Host = "[" + u.Host + "]" // IPv6 literal
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String()
}
