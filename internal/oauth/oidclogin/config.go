package oidclogin

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Config says which provider to use and how to read its answers.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document must
	// name exactly this issuer.
	Issuer       string
	ClientID     string
	ClientSecret string // empty for a public client (PKCE only)
	// Scopes asked for; default openid, email, profile. "openid" is always
	// added.
	Scopes []string
	// GroupsClaim names the ID token claim holding the user's groups (a
	// string array or a single string); empty means no groups.
	GroupsClaim string
	// AllowedDomains, when set, lists the email domains that may log in.
	AllowedDomains []string
	// RedirectURL is berth's callback URL registered at the provider;
	// Finish must be served there.
	RedirectURL string
	// Key protects the login cookie (encrypted and authenticated). Every
	// replica must share it so that a login started on one can finish on
	// another. At least 32 bytes.
	Key []byte
	// HTTPClient talks to the provider; nil means a client with a 30s
	// timeout.
	HTTPClient *http.Client
}

// MinKeyLen is the shortest Config.Key accepted.
const MinKeyLen = 32

// cookieTTL bounds how long a user may take at the provider.
const cookieTTL = 10 * time.Minute

// maxCallerState keeps the cookie under browsers' 4 KiB limit.
const maxCallerState = 1024

var defaultScopes = []string{"openid", "email", "profile"}

func (c *Config) check() error {
	if strings.TrimSpace(c.Issuer) == "" {
		return fmt.Errorf("OIDC issuer is empty")
	}
	if strings.TrimSpace(c.ClientID) == "" {
		return fmt.Errorf("OIDC client id for issuer %s is empty", c.Issuer)
	}
	if len(c.Key) < MinKeyLen {
		return fmt.Errorf("OIDC login cookie key is %d bytes; want at least %d", len(c.Key), MinKeyLen)
	}
	u, err := url.Parse(c.RedirectURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("OIDC redirect URL %q is not an absolute http(s) URL", c.RedirectURL)
	}
	if u.Fragment != "" {
		return fmt.Errorf("OIDC redirect URL %q must not have a fragment", c.RedirectURL)
	}
	for _, d := range c.AllowedDomains {
		if d = normalizeDomain(d); d == "" || strings.ContainsAny(d, "@ /") {
			return fmt.Errorf("allowed email domain %q is not a domain name", d)
		}
	}
	return nil
}

func (c *Config) scopes() []string {
	s := c.Scopes
	if len(s) == 0 {
		s = defaultScopes
	}
	out := []string{"openid"}
	for _, v := range s {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func normalizeDomain(d string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@"))
}
