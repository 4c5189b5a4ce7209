package mcpgw

import (
	"net"
	"net/http"
	"time"
)

// defaultHTTPClient has no overall timeout on purpose: upstream responses
// include long-lived event streams and tool calls that may run for minutes.
// Connection set-up is bounded here; each request is bounded by its context.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment, // exempts loopback upstreams
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 8,
		ForceAttemptHTTP2:   true,
	}}
}

// withHeaders returns a copy of base whose requests carry headers.
func withHeaders(base *http.Client, headers map[string]string) *http.Client {
	if len(headers) == 0 {
		return base
	}
	c := *base
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	c.Transport = headerTransport{base: rt, headers: h}
	return &c
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the caller's request.
	r := req.Clone(req.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}
