package egresstest

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// maxRequestBody bounds what a web host reads of a request's body (git's
// upload-pack requests are the largest, a few kilobytes).
const maxRequestBody = 10 << 20

// webHost is one web host: what it serves, and how many requests it had.
type webHost struct {
	name     string
	handler  http.Handler
	requests atomic.Int64
}

// serveWeb serves each host of handlers (by name) over HTTP on port 80
// and HTTPS on port 443 of both its addresses. Which host answers is
// decided by the address a connection came to, not by the Host header, as
// on a real internet where each name is its own machine.
func (i *Internet) serveWeb(ctx context.Context, handlers map[string]http.Handler) error {
	byAddr := map[netip.Addr]*webHost{}
	for name, h := range handlers {
		wh := &webHost{name: name, handler: withHello(h)}
		i.web[name] = wh
		byAddr[i.Hosts[name]] = wh
		byAddr[i.Hosts6[name]] = wh
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wh *webHost
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(la.String()); err == nil {
				wh = byAddr[ap.Addr().Unmap()]
			}
		}
		if wh == nil {
			http.NotFound(w, r)
			return
		}
		wh.requests.Add(1)
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		wh.handler.ServeHTTP(w, r)
	})
	errorLog := log.New(logWriter{i}, "", 0)
	plain := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errorLog,
	}
	secure := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errorLog,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{i.ca.leaf}, MinVersion: tls.VersionTLS12},
	}
	plainConns, secureConns := newConnSet(), newConnSet()
	i.stops = append(i.stops, stopHTTP(plain, plainConns), stopHTTP(secure, secureConns))
	for name := range handlers {
		for _, a := range []netip.Addr{i.Hosts[name], i.Hosts6[name]} {
			l, err := i.listen(ctx, "tcp", netip.AddrPortFrom(a, 80).String())
			if err != nil {
				return err
			}
			i.goServe(func() { plain.Serve(trackListener{l, plainConns}) }, nil)
			ls, err := i.listen(ctx, "tcp", netip.AddrPortFrom(a, 443).String())
			if err != nil {
				return err
			}
			i.goServe(func() { secure.ServeTLS(trackListener{ls, secureConns}, "", "") }, nil)
		}
	}
	return nil
}

// stopHTTP returns how to stop srv: let requests under way finish for a
// moment, then abort what is left (a client that stopped reading a large
// download must neither hold the test up nor keep the namespace alive).
func stopHTTP(srv *http.Server, conns *connSet) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		conns.closeAll()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return srv.Close()
	}
}

// Requests returns how many HTTP requests host name has answered.
func (i *Internet) Requests(name string) int64 {
	wh, ok := i.web[name]
	if !ok {
		return 0
	}
	return wh.requests.Load()
}

// logWriter sends the servers' error log to the test's log.
type logWriter struct{ i *Internet }

func (w logWriter) Write(p []byte) (int, error) {
	w.i.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
