// Package hostguard is berth's defence against DNS rebinding. A web page
// on a name its owner controls can re-point that name at 127.0.0.1; the
// browser then sends the page's requests to a loopback berth, with the
// page's name in the Host header and the page able to read the answers.
// So berth answers only to the Host values it was configured with: the
// public URL's host (and, for a loopback public URL, every loopback name
// on its port) and --allowed-hosts. One Policy serves every route and the
// /mcp transport guard alike.
package hostguard

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// Options configure a Policy.
type Options struct {
	// PublicURL is the URL clients use; its host is always allowed and its
	// origin is an allowed Origin.
	PublicURL string
	// AllowedHosts are further Host header values ("host" or "host:port"),
	// e.g. the name a reverse proxy forwards with.
	AllowedHosts []string
	// AllowedOrigins are further browser origins ("https://app.example").
	AllowedOrigins []string
}

// Policy is the set of Host values and browser origins berth answers to.
// A Policy built from no public URL and no allowed hosts allows nothing:
// a forgotten option fails closed.
type Policy struct {
	hosts   map[string]bool
	origins map[string]bool
}

// LoopbackNames are the names a loopback berth answers to, whichever of
// them its public URL uses: a client may say localhost where berth
// printed 127.0.0.1. Rebinding needs a name that first resolves
// elsewhere, so these are safe to accept.
var LoopbackNames = []string{"localhost", "127.0.0.1", "[::1]"}

// New builds the policy of o.
func New(o Options) *Policy {
	p := &Policy{hosts: map[string]bool{}, origins: map[string]bool{}}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		p.addHost(u.Host)
		p.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		if IsLoopback(u.Hostname()) {
			for _, alias := range LoopbackNames {
				h := alias
				if port := u.Port(); port != "" {
					h = alias + ":" + port
				}
				p.addHost(h)
				p.origins[strings.ToLower(u.Scheme+"://"+h)] = true
			}
		}
	}
	for _, h := range o.AllowedHosts {
		p.addHost(h)
	}
	for _, or := range o.AllowedOrigins {
		p.origins[strings.ToLower(strings.TrimSuffix(or, "/"))] = true
	}
	return p
}

// addHost allows h, and for a default port also the bare host, which is
// what clients send for port 80 or 443.
func (p *Policy) addHost(h string) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" {
		return
	}
	p.hosts[h] = true
	if host, port, err := net.SplitHostPort(h); err == nil && (port == "80" || port == "443") {
		p.hosts[host] = true
	}
}

// AllowsHost reports whether berth answers to a request with this Host.
func (p *Policy) AllowsHost(host string) bool { return p.hosts[strings.ToLower(host)] }

// AllowsOrigin reports whether a browser page of this origin may call.
func (p *Policy) AllowsOrigin(origin string) bool { return p.origins[strings.ToLower(origin)] }

// Allow reports whether r's Host is allowed; when it is not, it has
// answered 403 naming the Host and the flags that would allow it.
func (p *Policy) Allow(w http.ResponseWriter, r *http.Request) bool {
	if p.AllowsHost(r.Host) {
		return true
	}
	w.Header().Set("Cache-Control", "no-store")
	wire.WriteError(w, wire.Errorf(wire.CodeForbidden,
		"Host %q is not one this server answers to (DNS rebinding protection): it answers to the host of --public-url "+
			"(for a loopback URL also localhost, 127.0.0.1 and [::1] on its port) and to --allowed-hosts", r.Host))
	return false
}

// Middleware refuses every request whose Host is not allowed, except GET
// and HEAD requests for the exempt paths: health probes (Kubernetes sends
// the pod's IP as Host) answer whatever name they were reached by.
func (p *Policy) Middleware(exempt ...string) func(http.Handler) http.Handler {
	free := map[string]bool{}
	for _, path := range exempt {
		free[path] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			probe := free[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead)
			if probe || p.Allow(w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// IsLoopback reports whether host (a name or address, without port or
// brackets) is localhost or a loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
