package websession

import (
	"net/url"
	"strings"
)

// LocalPath reports whether target is a path on this site that a page may
// send the browser to after a sign-in or sign-out: an absolute path
// ("/servers?x=1"), never a URL with a scheme or host, nor a path a
// browser reads as one ("//evil.example", "/\evil.example"), so a link
// with return_to cannot make berth an open redirect.
func LocalPath(target string) bool {
	if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "//") || len(target) > 2048 {
		return false
	}
	// Browsers treat a backslash as a slash, and drop tabs and newlines
	// from URLs, so "/\t/evil.example" would be "//evil.example".
	if strings.ContainsAny(target, "\\") || strings.ContainsFunc(target, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return false
	}
	u, err := url.Parse(target)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}
