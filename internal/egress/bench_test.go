package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// Benchmarks compare a client reaching the loopback upstream directly
// with the same client going through the gateway (Reachable 127.0.0.0/8,
// no limits), by CONNECT, by absolute-URI forwarding, and by SOCKS5:
// the ratios are the gateway's cost.

// connectDialer opens a CONNECT tunnel through the gateway for each
// connection an http.Transport wants.
func connectDialer(proxyAddr string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", proxyAddr)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			c.Close()
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			c.Close()
			return nil, fmt.Errorf("CONNECT %s: %s", addr, resp.Status)
		}
		return &bufConn{Conn: c, r: br}, nil
	}
}

// benchClients are the ways to reach the upstream, each an http.Client
// and the host the URL names.
func benchClients(b *testing.B, keepAlive bool) (map[string]*http.Client, map[string]string) {
	dns := startTestDNS(b, testZone)
	tg := startGateway(b, dns, allowlist("files.test"))
	socks, err := proxy.SOCKS5("tcp", tg.proxy, nil, &net.Dialer{})
	if err != nil {
		b.Fatal(err)
	}
	tr := func(t *http.Transport) *http.Client {
		t.DisableKeepAlives = !keepAlive
		t.DisableCompression = true
		t.MaxIdleConnsPerHost = 4
		b.Cleanup(t.CloseIdleConnections)
		return &http.Client{Transport: t, Timeout: time.Minute}
	}
	clients := map[string]*http.Client{
		"direct":  tr(&http.Transport{}),
		"connect": tr(&http.Transport{DialContext: connectDialer(tg.proxy)}),
		"forward": tr(&http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: tg.proxy})}),
		"socks5":  tr(&http.Transport{DialContext: socks.(proxy.ContextDialer).DialContext}),
	}
	hosts := map[string]string{"direct": "127.0.0.1", "connect": "files.test", "forward": "files.test", "socks5": "files.test"}
	return clients, hosts
}

func fetch(b *testing.B, c *http.Client, url string) int64 {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return n
}

// BenchmarkDownload: 16 MiB per operation over a kept-alive connection.
func BenchmarkDownload(b *testing.B) {
	const size = 16 << 20
	up := startUpstream(b, false)
	clients, hosts := benchClients(b, true)
	for _, name := range []string{"direct", "connect", "forward", "socks5"} {
		b.Run(name, func(b *testing.B) {
			url := "http://" + net.JoinHostPort(hosts[name], up.port) + "/bytes/" + strconv.Itoa(size)
			fetch(b, clients[name], url) // the connection is made outside the timing
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				if n := fetch(b, clients[name], url); n != size {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}

// BenchmarkConnect: a new connection, one small request, closed.
func BenchmarkConnect(b *testing.B) {
	up := startUpstream(b, false)
	clients, hosts := benchClients(b, false)
	for _, name := range []string{"direct", "connect", "forward", "socks5"} {
		b.Run(name, func(b *testing.B) {
			url := "http://" + net.JoinHostPort(hosts[name], up.port) + "/hello"
			for b.Loop() {
				fetch(b, clients[name], url)
			}
		})
	}
}
