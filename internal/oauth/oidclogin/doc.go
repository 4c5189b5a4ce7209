// Package oidclogin signs users in through an upstream OpenID Connect
// provider (Keycloak, Dex, Entra ID, Google, ...) for berth's built-in
// authorization server. It owns the browser leg of that login: the
// redirect to the provider with PKCE and a nonce, the short-lived cookie
// that carries the login's secrets between the two legs, the code
// exchange, ID token verification, and the mapping of verified claims to
// an Identity. Creating users and issuing berth tokens is the caller's
// business.
package oidclogin
