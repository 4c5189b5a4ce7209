package oauth

import (
	"net/url"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/websession"
)

// prompt=login (OpenID Connect Core 3.1.2.1) must make the user log in
// again even with a valid browser session. The login resumes the
// authorization request by redirecting to it, where prompt=login is still
// present; so the resumed URL carries a marker proving that the login
// happened: a MAC, keyed by the new session's cookie, of the original
// query. Only that browser's session can produce or check it, and it is
// good for that one request only.
const freshLoginParam = "berth_fresh_login"

// splitFreshLogin separates the fresh-login marker, when the query ends
// with one, from the authorization request's own query.
func splitFreshLogin(rawQuery string) (query, marker string) {
	i := strings.LastIndex(rawQuery, "&"+freshLoginParam+"=")
	if i < 0 {
		return rawQuery, ""
	}
	return rawQuery[:i], rawQuery[i+len(freshLoginParam)+2:]
}

func freshLoginMAC(b *browserSession, query string) string {
	return b.MAC("fresh login", query)
}

// loggedInFor reports whether the session b was started by the login that
// the authorization request query asked for.
func loggedInFor(b *browserSession, query, marker string) bool {
	return websession.MACEqual(marker, freshLoginMAC(b, query))
}

// withFreshLogin returns where a login resumes, marked as done by the
// session b when the resumed request is an authorization with
// prompt=login; other places are returned unchanged.
func withFreshLogin(returnTo string, b *browserSession) string {
	query, ok := strings.CutPrefix(returnTo, "/oauth/authorize?")
	if !ok {
		return returnTo
	}
	q, err := url.ParseQuery(query)
	if err != nil || !slices.Contains(strings.Fields(q.Get("prompt")), "login") {
		return returnTo
	}
	return returnTo + "&" + freshLoginParam + "=" + freshLoginMAC(b, query)
}
