package oauth

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/rbac"
)

// Token endpoint authentication methods.
const (
	authNone   = "none"
	authBasic  = "client_secret_basic"
	authPost   = "client_secret_post"
	grantCode  = "authorization_code"
	grantRefr  = "refresh_token"
	respCode   = "code"
	maxScopeLn = 1000
)

// clientMetadata is the client metadata of RFC 7591 section 2, as
// registered or as published in a client ID metadata document. Unknown
// members are ignored, as RFC 7591 requires.
type clientMetadata struct {
	ClientID                string   `json:"client_id,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	LogoURI                 string   `json:"logo_uri,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
	Contacts                []string `json:"contacts,omitempty"`
	TosURI                  string   `json:"tos_uri,omitempty"`
	PolicyURI               string   `json:"policy_uri,omitempty"`
	SoftwareID              string   `json:"software_id,omitempty"`
	SoftwareVersion         string   `json:"software_version,omitempty"`
	// Secrets a metadata document must not carry (they would be public).
	ClientSecret          string `json:"client_secret,omitempty"`
	ClientSecretExpiresAt *int64 `json:"client_secret_expires_at,omitempty"`
}

// client is a client the authorization server knows: registered, or
// described by its metadata document.
type client struct {
	ID         string
	Meta       clientMetadata
	SecretHash []byte // nil for public clients
	// FromDocument: the client_id is a metadata document URL.
	FromDocument bool
}

func (c *client) name() string {
	if c.Meta.ClientName != "" {
		return c.Meta.ClientName
	}
	return c.ID
}

func (c *client) allowsGrant(g string) bool { return slices.Contains(c.Meta.GrantTypes, g) }

// allowedScopes returns the scopes the client registered, or nil for no
// restriction.
func (c *client) allowedScopes() []string {
	if c.Meta.Scope == "" {
		return nil
	}
	return strings.Fields(c.Meta.Scope)
}

// normalize fills defaults and checks metadata. fromDocument applies the
// rules for client ID metadata documents: public clients only, and no
// secret in the document. The error is an *oauthError with
// invalid_redirect_uri or invalid_client_metadata.
func (m *clientMetadata) normalize(fromDocument bool) *oauthError {
	bad := func(format string, args ...any) *oauthError {
		return oerr(errInvalidClientMetadata, format, args...)
	}
	if len(m.RedirectURIs) == 0 {
		return oerr(errInvalidRedirectURI, "redirect_uris is required and must list at least one URI")
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return oerr(errInvalidRedirectURI, "redirect_uris lists %d URIs; at most %d are allowed", len(m.RedirectURIs), maxRedirectURIs)
	}
	for _, u := range m.RedirectURIs {
		if err := validateRedirectURI(u); err != nil {
			return oerr(errInvalidRedirectURI, "%v", err)
		}
	}
	if m.TokenEndpointAuthMethod == "" {
		if fromDocument {
			m.TokenEndpointAuthMethod = authNone
		} else {
			m.TokenEndpointAuthMethod = authBasic // RFC 7591 2
		}
	}
	switch m.TokenEndpointAuthMethod {
	case authNone, authBasic, authPost:
	default:
		return bad("token_endpoint_auth_method %q is not supported; use none, client_secret_basic or client_secret_post", m.TokenEndpointAuthMethod)
	}
	if fromDocument {
		if m.TokenEndpointAuthMethod != authNone {
			return bad("a client ID metadata document client must use token_endpoint_auth_method none, not %q", m.TokenEndpointAuthMethod)
		}
		if m.ClientSecret != "" || m.ClientSecretExpiresAt != nil {
			return bad("a client ID metadata document must not contain client_secret or client_secret_expires_at")
		}
	}
	m.ClientSecret, m.ClientSecretExpiresAt = "", nil
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{grantCode}
	}
	for _, g := range m.GrantTypes {
		if g != grantCode && g != grantRefr {
			return bad("grant_types: %q is not supported; use authorization_code and refresh_token", g)
		}
	}
	if !slices.Contains(m.GrantTypes, grantCode) {
		return bad("grant_types must include authorization_code")
	}
	m.GrantTypes = slices.Compact(m.GrantTypes)
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{respCode}
	}
	for _, rt := range m.ResponseTypes {
		if rt != respCode {
			return bad("response_types: %q is not supported; only code is", rt)
		}
	}
	m.ResponseTypes = []string{respCode}
	if len(m.ClientName) > maxClientNameLen || hasControl(m.ClientName) {
		return bad("client_name must be at most %d characters without control characters", maxClientNameLen)
	}
	if len(m.Scope) > maxScopeLn {
		return bad("scope is longer than %d characters", maxScopeLn)
	}
	if m.Scope != "" {
		if _, err := rbac.ParseScopes(strings.Fields(m.Scope)); err != nil {
			return bad("scope: %v", err)
		}
	}
	for field, v := range map[string]string{"client_uri": m.ClientURI, "logo_uri": m.LogoURI, "tos_uri": m.TosURI, "policy_uri": m.PolicyURI} {
		if v == "" {
			continue
		}
		if err := checkWebURL(v); err != nil {
			return bad("%s: %v", field, err)
		}
	}
	for field, v := range map[string]string{"software_id": m.SoftwareID, "software_version": m.SoftwareVersion} {
		if len(v) > maxPlainMetadataLen || hasControl(v) {
			return bad("%s must be at most %d characters without control characters", field, maxPlainMetadataLen)
		}
	}
	if len(m.Contacts) > 20 {
		return bad("contacts lists more than 20 entries")
	}
	for _, c := range m.Contacts {
		if len(c) > 320 || hasControl(c) {
			return bad("contacts: each entry must be at most 320 characters without control characters")
		}
	}
	return nil
}

// checkWebURL accepts an https URL, or http on a loopback host: URLs that
// are only ever shown or linked, never script.
func checkWebURL(raw string) error {
	if len(raw) > maxPlainMetadataLen || hasControl(raw) {
		return fmt.Errorf("must be at most %d characters without control characters", maxPlainMetadataLen)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && hostguard.IsLoopback(u.Hostname())) {
		return fmt.Errorf("%q must be an https URL", raw)
	}
	return nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}
