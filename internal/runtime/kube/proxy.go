package kube

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// networkAPIServer is the endpoint network of pods reached through the
// API server's pod proxy; the address is namespace/pod:port.
const networkAPIServer = "kube-apiserver"

var _ runtime.Transporter = (*Runtime)(nil)

func proxyEndpoint(ns, pod string) runtime.Endpoint {
	return runtime.Endpoint{Network: networkAPIServer, Address: ns + "/" + pod + ":" + strconv.Itoa(agentPort)}
}

// Transport implements runtime.Transporter for pods behind the API
// server's proxy: each request goes to the pod's proxy subresource as
// berth's identity, with the agent token moved to wire.AgentTokenHeader
// (the API server takes Authorization for itself and removes it).
func (r *Runtime) Transport(ep runtime.Endpoint) (http.RoundTripper, error) {
	if ep.Network != networkAPIServer {
		return nil, fmt.Errorf("kubernetes runtime: no transport for network %q", ep.Network)
	}
	ns, pod, ok := strings.Cut(ep.Address, "/")
	name, port, err := net.SplitHostPort(pod)
	if !ok || err != nil || checkLabel("namespace", ns) != nil {
		return nil, fmt.Errorf("kubernetes runtime: endpoint %q: want namespace/pod:port", ep.Address)
	}
	cfg := rest.CopyConfig(r.opts.Config)
	// HTTP/1.1: a WebSocket upgrade cannot cross an HTTP/2 connection.
	cfg.NextProtos = []string{"http/1.1"}
	base, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: API server transport: %w", err)
	}
	host, err := url.Parse(r.opts.Config.Host)
	if err != nil || host.Host == "" {
		return nil, fmt.Errorf("kubernetes runtime: API server address %q: %v", r.opts.Config.Host, err)
	}
	return &podProxy{base: base, api: host, prefix: proxyPath(ns, name, port)}, nil
}

// proxyPath is the pod proxy subresource of one pod and port.
func proxyPath(ns, pod, port string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(pod) + ":" + port + "/proxy"
}

type podProxy struct {
	base   http.RoundTripper
	api    *url.URL
	prefix string
}

func (p *podProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	u := *p.api
	// The path keeps its escaping: an escaped slash stays one segment.
	base := strings.TrimSuffix(u.Path, "/") + p.prefix
	u.Path = base + req.URL.Path
	u.RawPath = base + req.URL.EscapedPath()
	u.RawQuery = req.URL.RawQuery
	out.URL, out.Host = &u, ""
	if tok, ok := strings.CutPrefix(out.Header.Get("Authorization"), "Bearer "); ok {
		out.Header.Del("Authorization")
		out.Header.Set(wire.AgentTokenHeader, tok)
	}
	return p.base.RoundTrip(out)
}

func (p *podProxy) CloseIdleConnections() {
	if c, ok := p.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
