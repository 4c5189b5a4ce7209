package oauth_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestGoSDKClient: the official Go MCP SDK's OAuth client connects to
// /mcp knowing only its URL: discovery from the 401, dynamic registration,
// PKCE, login and consent (driven headlessly), token, tools/list.
func TestGoSDKClient(t *testing.T) {
	t.Run("127.0.0.1", func(t *testing.T) { testGoSDKClient(t, "127.0.0.1") })
	// Told 127.0.0.1, a user may well type localhost: the metadata must
	// then name localhost, as the client checks, and login still works.
	t.Run("localhost", func(t *testing.T) { testGoSDKClient(t, "localhost") })
}

func testGoSDKClient(t *testing.T, host string) {
	e := newEnv(t, nil)
	b := e.browser(t, "sdk-user")
	fetched := 0
	fetcher := func(_ context.Context, args *mcpauth.AuthorizationArgs) (*mcpauth.AuthorizationResult, error) {
		fetched++
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, err
		}
		res := b.authorize(u.Query())
		if res.redirect == nil {
			return nil, fmt.Errorf("authorization ended on a page: %d %s", res.status, res.page)
		}
		q := res.redirect.Query()
		if q.Get("error") != "" {
			return nil, fmt.Errorf("authorization error %s: %s", q.Get("error"), q.Get("error_description"))
		}
		return &mcpauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
	h, err := mcpauth.NewAuthorizationCodeHandler(&mcpauth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &mcpauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "go-sdk test", RedirectURIs: []string{testRedirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"},
		}},
		RedirectURL:              testRedirect,
		AuthorizationCodeFetcher: fetcher,
		Client:                   e.http,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-oauth", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: strings.Replace(e.url, "127.0.0.1", host, 1) + "/mcp", OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	if fetched != 1 {
		t.Fatalf("authorization ran %d times, want 1", fetched)
	}
	if n := e.count(t, "oauth_clients"); n != 1 {
		t.Fatalf("%d clients registered, want 1", n)
	}
}
