package kube

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

type capture struct{ req *http.Request }

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	c.req = r
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

// TestPodProxyURLs: requests for the agent become requests for the pod's
// proxy subresource, the query kept, the agent token moved out of
// Authorization (the API server's).
func TestPodProxyURLs(t *testing.T) {
	api, _ := url.Parse("https://203.0.113.7:6443/prefix")
	c := &capture{}
	p := &podProxy{base: c, api: api, prefix: proxyPath("team-a", "0f8e9d2c-1111", "7070")}
	req, _ := http.NewRequest(http.MethodPost, "http://agent/api/sessions/s%2F1/exec?wait=1", nil)
	req.Header.Set("Authorization", "Bearer agent-token")
	if _, err := p.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	got := c.req.URL.String()
	want := "https://203.0.113.7:6443/prefix/api/v1/namespaces/team-a/pods/0f8e9d2c-1111:7070/proxy/api/sessions/s%2F1/exec?wait=1"
	if got != want {
		t.Fatalf("proxied to %s\nwant        %s", got, want)
	}
	if c.req.Header.Get("Authorization") != "" || c.req.Header.Get(wire.AgentTokenHeader) != "agent-token" {
		t.Fatalf("headers %v", c.req.Header)
	}
	if req.Header.Get("Authorization") == "" {
		t.Fatal("the caller's request was changed")
	}
}
