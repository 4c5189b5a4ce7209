package mcpserver

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// GuardOptions configure the transport protections of /mcp.
type GuardOptions struct {
	// PublicURL is the URL clients use; its host is always allowed and its
	// origin is an allowed Origin.
	PublicURL string
	// AllowedHosts are further Host header values ("host" or "host:port"),
	// e.g. the name a reverse proxy forwards with.
	AllowedHosts []string
	// AllowedOrigins are further browser origins ("https://app.example").
	AllowedOrigins []string
	// MaxBodyBytes limits request bodies (0 = 4 MiB).
	MaxBodyBytes int64
}

func (o GuardOptions) maxBody() int64 {
	if o.MaxBodyBytes <= 0 {
		return 4 << 20
	}
	return o.MaxBodyBytes
}

// guard enforces, in order: the Host header is one berth answers to (DNS
// rebinding -> 403), a browser Origin is allowed (-> 403), POST bodies are
// JSON (-> 415), and bodies are bounded (-> 413).
func guard(o GuardOptions, next http.Handler) http.Handler {
	hosts := map[string]bool{}
	origins := map[string]bool{}
	addHost := func(h string) {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			return
		}
		hosts[h] = true
		if host, port, err := net.SplitHostPort(h); err == nil && (port == "80" || port == "443") {
			hosts[host] = true
		}
	}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		addHost(u.Host)
		origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		// A loopback server answers to every loopback name: a client may
		// say localhost where berth printed 127.0.0.1. Rebinding needs a
		// name that resolves elsewhere first, so these stay safe.
		if isLoopback(u.Hostname()) {
			for _, alias := range []string{"localhost", "127.0.0.1", "[::1]"} {
				h := alias
				if port := u.Port(); port != "" {
					h = alias + ":" + port
				}
				addHost(h)
				origins[strings.ToLower(u.Scheme+"://"+h)] = true
			}
		}
	}
	for _, h := range o.AllowedHosts {
		addHost(h)
	}
	for _, or := range o.AllowedOrigins {
		origins[strings.ToLower(strings.TrimSuffix(or, "/"))] = true
	}
	limit := o.maxBody()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts[strings.ToLower(r.Host)] {
			wire.WriteError(w, wire.Errorf(wire.CodeForbidden, "Host %q is not one this server answers to (DNS rebinding protection); configure --public-url or --allowed-hosts", r.Host))
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !origins[strings.ToLower(origin)] {
			wire.WriteError(w, wire.Errorf(wire.CodeForbidden, "Origin %q is not allowed; configure --allowed-origins", origin))
			return
		}
		if r.Method == http.MethodPost {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				wire.WriteError(w, wire.Errorf(wire.CodeUnsupportedMedia, "Content-Type must be application/json, got %q", r.Header.Get("Content-Type")))
				return
			}
			if r.ContentLength > limit {
				wire.WriteError(w, wire.Errorf(wire.CodeTooLarge, "request body is %d bytes; the limit is %d", r.ContentLength, limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
