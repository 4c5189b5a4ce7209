package mcpgw

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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

// boundAnswers returns a copy of base whose answers fail once a body that
// is not an event stream goes past limit bytes. Event streams are long
// lived; the SDK bounds each of their events instead.
func boundAnswers(base *http.Client, limit int64) *http.Client {
	c := *base
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = boundTransport{base: rt, limit: limit}
	return &c
}

type boundTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &boundBody{ReadCloser: resp.Body, left: t.limit, limit: t.limit}
	return resp, nil
}

// boundBody fails a read past its limit rather than ending early, so a
// cut answer is never taken for a whole one.
type boundBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.tooLarge()
	}
	return n, err
}

func (b *boundBody) tooLarge() error {
	return fmt.Errorf("upstream answer longer than %d bytes", b.limit)
}
