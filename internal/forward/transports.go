package forward

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Transport settings. There is no response-header timeout on purpose: a
// bash call may run for many minutes before the agent answers, and the
// caller's context bounds it instead.
const (
	dialTimeout         = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxIdleConnsPerHost = 64
	ioBufferSize        = 32 << 10
	// maxResponseHeaderBytes bounds the headers of an agent's answer
	// (net/http's default is 10 MiB): agents are untrusted, and none of
	// berth's or a sandbox app's legitimate answers comes near it.
	maxResponseHeaderBytes = 64 << 10
)

// Transports caches one transport per agent endpoint, keyed by network
// and address, so keep-alive connections are reused across requests to the
// same sandbox. It is safe for concurrent use.
type Transports struct {
	mu sync.Mutex
	m  map[string]http.RoundTripper
	// Custom makes the transport of endpoints that are not dialed as
	// their network and address (unix, tcp), such as a Kubernetes pod
	// behind the API server's proxy: the runtime's runtime.Transporter.
	Custom func(runtime.Endpoint) (http.RoundTripper, error)
}

// NewTransports returns an empty cache.
func NewTransports() *Transports {
	return &Transports{m: make(map[string]http.RoundTripper)}
}

func endpointKey(ep runtime.Endpoint) string { return ep.Network + "\x00" + ep.Address }

// For returns the transport for ep, creating it on first use. The
// transport dials ep whatever host the request URL names.
func (t *Transports) For(ep runtime.Endpoint) http.RoundTripper {
	key := endpointKey(ep)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]http.RoundTripper)
	}
	if tr, ok := t.m[key]; ok {
		return tr
	}
	var tr http.RoundTripper
	switch {
	case ep.Network == "unix" || ep.Network == "tcp":
		tr = newTransport(ep)
	case t.Custom != nil:
		custom, err := t.Custom(ep)
		if err != nil {
			return failing{err}
		}
		tr = custom
	default:
		return failing{fmt.Errorf("no way to reach an endpoint of network %q", ep.Network)}
	}
	w := &watched{tr: tr}
	t.m[key] = w
	return w
}

// CloseIdle closes the idle keep-alive connections to ep, keeping its
// transport: for when its agent was found not answering, so that the
// next call dials afresh.
func (t *Transports) CloseIdle(ep runtime.Endpoint) {
	t.mu.Lock()
	tr, ok := t.m[endpointKey(ep)]
	t.mu.Unlock()
	if ok {
		closeIdle(tr)
	}
}

// watched is an endpoint's transport as For hands it out: a call that a
// deadline cuts (Bound, WithIdle), while it waits for an answer or reads
// one, closes the endpoint's idle connections, which lead to the same
// agent that just did not answer.
type watched struct{ tr http.RoundTripper }

func (w *watched) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	stop := context.AfterFunc(ctx, func() {
		if Cut(ctx) != nil {
			closeIdle(w.tr)
		}
	})
	resp, err := w.tr.RoundTrip(r)
	if err != nil {
		stop()
		return nil, err
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
		resp.Body = &watchedConn{rwc, stop}
	} else {
		resp.Body = &watchedBody{resp.Body, stop}
	}
	return resp, nil
}

func (w *watched) CloseIdleConnections() { closeIdle(w.tr) }

// watchedBody stops watching its call's deadline once closed.
type watchedBody struct {
	io.ReadCloser
	stop func() bool
}

func (b *watchedBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}

// watchedConn is watchedBody for an upgraded connection, which
// ReverseProxy writes to as well.
type watchedConn struct {
	io.ReadWriteCloser
	stop func() bool
}

func (c *watchedConn) Close() error {
	c.stop()
	return c.ReadWriteCloser.Close()
}

// failing is the transport of an endpoint berth cannot reach.
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

func closeIdle(tr http.RoundTripper) {
	if c, ok := tr.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Forget drops the transport for ep and closes its idle connections, for
// when a sandbox is deleted. Requests in flight on it finish normally.
func (t *Transports) Forget(ep runtime.Endpoint) {
	key := endpointKey(ep)
	t.mu.Lock()
	tr, ok := t.m[key]
	delete(t.m, key)
	t.mu.Unlock()
	if ok {
		closeIdle(tr)
	}
}

// Close drops every transport and closes their idle connections. The
// cache stays usable: a later For starts a fresh transport.
func (t *Transports) Close() {
	t.mu.Lock()
	old := t.m
	t.m = make(map[string]http.RoundTripper)
	t.mu.Unlock()
	for _, tr := range old {
		closeIdle(tr)
	}
}

func newTransport(ep runtime.Endpoint) *http.Transport {
	dialer := &net.Dialer{Timeout: dialTimeout}
	network, address := ep.Network, ep.Address
	return &http.Transport{
		// Proxy stays nil: HTTP_PROXY from the environment must never
		// capture traffic meant for a sandbox.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, address)
		},
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        maxIdleConnsPerHost,
		MaxIdleConnsPerHost: maxIdleConnsPerHost,
		IdleConnTimeout:     idleConnTimeout,
		// The body goes to the caller as the agent sent it; transparent
		// gzip would change Content-Encoding and Content-Length.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		WriteBufferSize:        ioBufferSize,
		ReadBufferSize:         ioBufferSize,
	}
}
