package oauth

import (
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
)

// ResourceMetadata is the protected resource metadata of RFC 9728.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// NewResourceMetadata returns the metadata of berth's resource at
// resource, whose tokens come from the authorization server issuer.
func NewResourceMetadata(resource, issuer, documentation string) ResourceMetadata {
	name := "berth"
	if strings.HasSuffix(resource, "/mcp") {
		name = "berth MCP"
	}
	return ResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{issuer},
		ScopesSupported:        rbac.ScopeStrings(rbac.AdvertisedScopes()),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           name,
		ResourceDocumentation:  documentation,
	}
}

// ResourceMetadataHandler serves RFC 9728 metadata at
// /.well-known/oauth-protected-resource (resource = publicURL) and
// /.well-known/oauth-protected-resource/mcp (resource = publicURL/mcp),
// naming issuer as the authorization server. The external authorization
// server mode uses it with the upstream issuer.
func ResourceMetadataHandler(publicURL, issuer, documentation string) http.Handler {
	base := strings.TrimRight(publicURL, "/")
	return allowAnyOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		resource := requestBase(base, r)
		if strings.HasSuffix(r.URL.Path, "/mcp") {
			resource += "/mcp"
		}
		writeMetadata(w, NewResourceMetadata(resource, issuer, documentation))
	}))
}

func (s *Server) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	resource := requestBase(s.issuer, r)
	if strings.HasSuffix(r.URL.Path, "/mcp") {
		resource += "/mcp"
	}
	writeMetadata(w, NewResourceMetadata(resource, s.issuer, s.opts.ResourceDocumentation))
}

// serverMetadata is the authorization server metadata of RFC 8414.
type serverMetadata struct {
	Issuer                                 string   `json:"issuer"`
	AuthorizationEndpoint                  string   `json:"authorization_endpoint"`
	TokenEndpoint                          string   `json:"token_endpoint"`
	RegistrationEndpoint                   string   `json:"registration_endpoint"`
	RevocationEndpoint                     string   `json:"revocation_endpoint"`
	ResponseTypesSupported                 []string `json:"response_types_supported"`
	ResponseModesSupported                 []string `json:"response_modes_supported"`
	GrantTypesSupported                    []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported          []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported      []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported []string `json:"revocation_endpoint_auth_methods_supported"`
	ScopesSupported                        []string `json:"scopes_supported"`
	AuthorizationResponseIssParameter      bool     `json:"authorization_response_iss_parameter_supported"`
	ClientIDMetadataDocumentSupported      bool     `json:"client_id_metadata_document_supported"`
	ServiceDocumentation                   string   `json:"service_documentation,omitempty"`
}

func (s *Server) serveServerMetadata(w http.ResponseWriter, _ *http.Request) {
	authMethods := []string{authNone, authBasic, authPost}
	writeMetadata(w, serverMetadata{
		Issuer:                                 s.issuer,
		AuthorizationEndpoint:                  s.issuer + "/oauth/authorize",
		TokenEndpoint:                          s.issuer + "/oauth/token",
		RegistrationEndpoint:                   s.issuer + "/oauth/register",
		RevocationEndpoint:                     s.issuer + "/oauth/revoke",
		ResponseTypesSupported:                 []string{respCode},
		ResponseModesSupported:                 []string{"query"},
		GrantTypesSupported:                    []string{grantCode, grantRefr},
		CodeChallengeMethodsSupported:          []string{"S256"},
		TokenEndpointAuthMethodsSupported:      authMethods,
		RevocationEndpointAuthMethodsSupported: authMethods,
		ScopesSupported:                        rbac.ScopeStrings(rbac.AdvertisedScopes()),
		AuthorizationResponseIssParameter:      true,
		ClientIDMetadataDocumentSupported:      true,
		ServiceDocumentation:                   s.opts.ResourceDocumentation,
	})
}

// writeMetadata answers a metadata document; it may be cached briefly.
func writeMetadata(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_ = jsonEncoder(w).Encode(v)
}
