package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"
)

// HTTP proxy bounds.
const (
	httpHeaderTimeout   = 30 * time.Second
	httpIdleTimeout     = 2 * time.Minute
	httpMaxHeaderBytes  = 64 << 10
	upstreamHeaderLimit = 1 << 20
	upstreamRespTimeout = 10 * time.Minute
)

// RefusedHeader names the reason in a refused HTTP proxy request's answer.
const RefusedHeader = "X-Berth-Egress-Refused"

// newHTTPServer serves the proxy requests of connections the gateway
// sniffed as HTTP.
func (g *Gateway) newHTTPServer(ctx context.Context) *http.Server {
	return &http.Server{
		Handler:           http.HandlerFunc(g.serveHTTP),
		ReadHeaderTimeout: httpHeaderTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          g.stdLogger(),
	}
}

// newTransport forwards absolute-URI requests; every new connection it
// makes goes through dialTarget, so it is decided like a CONNECT.
func (g *Gateway) newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil, // never the environment's proxy: berth dials itself
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			t, err := splitTarget(addr)
			if err != nil {
				return nil, err
			}
			return g.dialTarget(ctx, t)
		},
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		ResponseHeaderTimeout:  upstreamRespTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: upstreamHeaderLimit,
		// Pass Accept-Encoding and bodies through as they are.
		DisableCompression: true,
	}
}

func (g *Gateway) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// ReverseProxy drops the hop-by-hop headers; the Proxy-*
			// ones are for berth, never for the server.
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Proxy-") {
					pr.Out.Header.Del(k)
				}
			}
		},
		Transport: g.transport,
		ErrorLog:  g.stdLogger(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var ref *Refusal
			if errors.As(err, &ref) {
				writeRefusal(w, ref)
				return
			}
			if r.Context().Err() != nil {
				return
			}
			http.Error(w, "berth egress: "+err.Error(), http.StatusBadGateway)
		},
	}
}

func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.track.enter() {
		return
	}
	defer g.track.leave()
	switch {
	case r.Method == http.MethodConnect:
		g.connect(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
		g.forward(w, r)
	case r.URL.IsAbs():
		http.Error(w, "berth egress proxy: only http:// URIs are forwarded; use CONNECT (HTTPS_PROXY) for "+r.URL.Scheme, http.StatusBadRequest)
	default:
		http.Error(w, "berth egress proxy: send CONNECT host:port or an absolute http:// URI (set HTTP_PROXY and HTTPS_PROXY)", http.StatusBadRequest)
	}
}

// connect opens a tunnel for CONNECT host:port.
func (g *Gateway) connect(w http.ResponseWriter, r *http.Request) {
	// A CONNECT that fails ends its connection: clients open a new one
	// for the next tunnel, and an answer they did not expect cannot be
	// followed by bytes they meant for the server.
	w.Header().Set("Connection", "close")
	t, err := splitTarget(r.Host)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			writeRefusal(w, g.refuse(ref))
			return
		}
		http.Error(w, "berth egress proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, err := g.dialTarget(r.Context(), t)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			writeRefusal(w, ref)
			return
		}
		http.Error(w, "berth egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Del("Connection")
	rc := http.NewResponseController(w)
	client, brw, err := rc.Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "berth egress proxy: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return
	}
	// Bytes the client sent right after its request are already read.
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		if _, err := up.Write(early); err != nil {
			client.Close()
			up.Close()
			return
		}
	}
	tunnel(client, up, tunnelIdle)
}

// forward sends an absolute-URI request on and streams the answer back.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Host
	if r.URL.Port() == "" {
		host = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	t, err := splitTarget(host)
	if err != nil {
		var ref *Refusal
		if errors.As(err, &ref) {
			writeRefusal(w, g.refuse(ref))
			return
		}
		http.Error(w, "berth egress proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	// A pooled connection was decided when it was made; the policy may
	// have changed since, so the request itself is decided too.
	if reason := g.dec.allowedByPolicy(r.Context(), t); reason != "" {
		writeRefusal(w, g.refuse(t.refuse(reason)))
		return
	}
	g.proxy.ServeHTTP(w, r)
}

// splitTarget reads "host:port" as a proxy request gives it.
func splitTarget(hostport string) (target, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return target{}, fmt.Errorf("%q is not host:port", printable(hostport))
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return target{}, fmt.Errorf("port %q is not a number from 1 to 65535", printable(portStr))
	}
	return parseTarget(host, uint16(port))
}

// writeRefusal answers 403 with the reason in a header and one line.
func writeRefusal(w http.ResponseWriter, r *Refusal) {
	w.Header().Set(RefusedHeader, r.Reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, "berth egress refused: "+r.target()+" ("+r.Reason+")\n")
}
