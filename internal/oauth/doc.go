// Package oauth is berth's built-in OAuth 2.1 authorization server and the
// resource-server side of the MCP authorization specification: protected
// resource metadata (RFC 9728), authorization server metadata (RFC 8414),
// client registration (Dynamic Client Registration, RFC 7591/7592, and
// Client ID Metadata Documents), the authorization code flow with PKCE and
// resource indicators (RFC 7636, RFC 8707, RFC 9207), the token and
// revocation endpoints (RFC 6749, RFC 7009), the consent and login pages,
// and the authenticator that turns its access tokens into principals.
//
// Who a user is comes from elsewhere: the development login page, or an
// upstream OpenID Connect provider through the Upstream interface
// (internal/oauth/oidclogin). What a principal may do is internal/rbac's.
//
// Browser sessions, form CSRF tokens and the same-origin check of posted
// forms are internal/websession's; every row it reads or writes goes
// through internal/store (oauth_*.go), so this package holds no SQL.
//
// Every secret it hands out (client secrets, registration access tokens,
// browser session cookies, codes, access and refresh tokens) is random,
// carries a recognizable prefix, and is stored as its SHA-256 only.
package oauth
