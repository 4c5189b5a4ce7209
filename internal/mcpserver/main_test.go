package mcpserver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
)

var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// env is a running orchestrator with /mcp served on a loopback port.
type env struct {
	*orchtest.Env
	url string
}

func newEnv(t testing.TB, guard mcpserver.GuardOptions) *env {
	t.Helper()
	e := orchtest.New(t, agentBin, orchestrator.Config{})
	authOpts := auth.MiddlewareOptions{
		Authenticators:      []auth.Authenticator{e.Svc},
		Realm:               "berth",
		ResourceMetadataURL: func(*http.Request) string { return "http://berth.test/.well-known/oauth-protected-resource/mcp" },
	}
	url := orchtest.Serve(t, func(url string) http.Handler {
		if guard.Hosts.PublicURL == "" {
			guard.Hosts.PublicURL = url
		}
		return mcpserver.New(e.Svc, mcpserver.Options{Auth: authOpts, Guard: guard}).Handler()
	})
	return &env{Env: e, url: url}
}

type headerTransport struct {
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect returns an MCP client session authenticated with token.
func (e *env) connect(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + token}}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
