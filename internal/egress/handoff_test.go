package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"testing"
	"time"
)

// sharedFront is one proxy port and one DNS port for several sandboxes'
// gateways, as on Kubernetes: each connection and DNS message goes to
// the gateway of its source address, an unknown source is closed.
type sharedFront struct {
	proxy, dnsUDP, dnsTCP string
	by                    map[netip.Addr]*Gateway
}

func startSharedFront(t *testing.T, by map[netip.Addr]*Gateway) *sharedFront {
	t.Helper()
	f := &sharedFront{by: by}
	pl, dl := listen(t), listen(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	f.proxy, f.dnsTCP, f.dnsUDP = pl.Addr().String(), dl.Addr().String(), pc.LocalAddr().String()
	source := func(a net.Addr) *Gateway {
		ap, _ := netip.ParseAddrPort(a.String())
		return by[ap.Addr()]
	}
	accept := func(l net.Listener, serve func(*Gateway, net.Conn)) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			g := source(c.RemoteAddr())
			if g == nil {
				c.Close()
				continue
			}
			serve(g, c)
		}
	}
	go accept(pl, (*Gateway).ServeConn)
	go accept(dl, (*Gateway).ServeDNSConn)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if g := source(from); g != nil {
				g.AnswerDNS(buf[:n], func(resp []byte) { pc.WriteTo(resp, from) })
			}
		}
	}()
	return f
}

// from dials addr over network from source address src.
func from(src netip.Addr) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
}

func startedGateway(t *testing.T, dns *testDNS, p Policy) *Gateway {
	t.Helper()
	g := NewGateway(Config{Guard: &Guard{Reachable: loopbackReachable}, Resolver: dns.resolver(),
		Policy: func(context.Context) (Policy, error) { return p, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-g.Done():
		case <-time.After(10 * time.Second):
			t.Error("the gateway did not stop within 10 s of its context ending")
		}
	})
	return g
}

// TestHandedConnections: two sandboxes share one proxy port and one DNS
// port; each connection and question is decided by its own sandbox's
// policy, and a connection from a source no sandbox has gets nothing.
func TestHandedConnections(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	front := startSharedFront(t, map[netip.Addr]*Gateway{
		a: startedGateway(t, dns, allowlist("files.test")),
		b: startedGateway(t, dns, allowlist("other.test")),
	})
	get := func(src netip.Addr, host string) (int, error) {
		tr := &http.Transport{Proxy: http.ProxyURL(mustURL("http://" + front.proxy)), DialContext: from(src).DialContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get("http://" + host + ":" + up.port + "/hello")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	for _, c := range []struct {
		src  netip.Addr
		host string
		want int
	}{{a, "files.test", 200}, {a, "other.test", 403}, {b, "other.test", 200}, {b, "files.test", 403}} {
		if got, err := get(c.src, c.host); err != nil || got != c.want {
			t.Errorf("from %s, %s: %d %v, want %d", c.src, c.host, got, err, c.want)
		}
	}
	resolver := func(src netip.Addr, network, addr string) *net.Resolver {
		return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := from(src)
			if network == "udp" {
				d.LocalAddr = &net.UDPAddr{IP: src.AsSlice()}
			}
			return d.DialContext(ctx, network, addr)
		}}
	}
	ctx := context.Background()
	for _, q := range []struct{ network, addr string }{{"udp", front.dnsUDP}, {"tcp", front.dnsTCP}} {
		ips, err := resolver(a, q.network, q.addr).LookupNetIP(ctx, "ip4", "files.test")
		if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%s: sandbox a's files.test: %v %v", q.network, ips, err)
		}
		_, err = resolver(b, q.network, q.addr).LookupNetIP(ctx, "ip4", "files.test")
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Errorf("%s: sandbox b's files.test: %v, want not found", q.network, err)
		}
	}
	// An unknown source: closed at once, no answer.
	c, err := from(netip.MustParseAddr("127.0.0.4")).Dial("tcp", front.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET http://files.test:%s/hello HTTP/1.1\r\nHost: files.test\r\n\r\n", up.port)
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection from an unknown source got an answer or hung: %v", err)
	}
}

// TestHandedConnectionsOutsideTheGatewaysLife: a connection handed to a
// gateway not yet started, or stopped, is closed at once; stopping
// closes the connections it holds and ends its goroutines.
func TestHandedConnectionsOutsideTheGatewaysLife(t *testing.T) {
	closedAtOnce := func(what string, serve func(net.Conn)) {
		t.Helper()
		client, server := net.Pipe()
		defer client.Close()
		serve(server)
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("%s: read %v, want the connection closed", what, err)
		}
	}
	g := NewGateway(Config{Guard: &Guard{}})
	closedAtOnce("before Start", g.ServeConn)
	closedAtOnce("DNS before Start", g.ServeDNSConn)
	if g.AnswerDNS([]byte{0, 1}, func([]byte) { t.Error("answered before Start") }) {
		t.Error("AnswerDNS took a message before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err == nil {
		t.Error("a Gateway started twice")
	}
	// A connection that never sends its first byte is held until the
	// gateway stops.
	client, server := net.Pipe()
	defer client.Close()
	g.ServeConn(server)
	cancel()
	select {
	case <-g.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not stop")
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a held connection after the gateway stopped: read %v, want it closed", err)
	}
	closedAtOnce("after the end", g.ServeConn)
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
