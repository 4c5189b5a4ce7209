package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestConnect(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, true)
	tg := startGateway(t, dns, allowlist("files.test", "*.github.test:"+up.port, "rebind.test", "private.test"))

	// An allowed name: a TLS conversation end to end through the tunnel.
	c, resp, body := tg.connect(t, "files.test:"+up.port)
	if c == nil {
		t.Fatalf("CONNECT files.test refused: %s %s", resp.Status, body)
	}
	tc := tls.Client(c, &tls.Config{RootCAs: up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"})
	resp, got, err := get(t, tc, "files.test", "/hello")
	if err != nil || resp.StatusCode != 200 || string(got) != "hello from upstream\n" {
		t.Fatalf("GET through the tunnel: %v %v %q", resp, err, got)
	}
	tc.Close()
	if tg.allowed.Load() == 0 {
		t.Error("Allowed was not told of the connection")
	}

	// A wildcard entry with a port.
	c, resp, body = tg.connect(t, "api.github.test:"+up.port)
	if c == nil {
		t.Fatalf("CONNECT api.github.test refused: %s %s", resp.Status, body)
	}
	c.Close()

	for _, tc := range []struct {
		hostport, reason string
	}{
		{"other.test:" + up.port, "not in allowlist"},
		{"api.github.test:1", "not in allowlist"},
		{"127.0.0.1:" + up.port, "not in allowlist"},
		{"private.test:5432", "private range"}, // allowed name, private address
	} {
		c, resp, body := tg.connect(t, tc.hostport)
		if c != nil {
			c.Close()
			t.Fatalf("CONNECT %s allowed", tc.hostport)
		}
		wantRefused(t, resp, body, tc.reason)
		if r := tg.lastRefusal(t); r.Reason != tc.reason {
			t.Errorf("CONNECT %s: reported reason %q", tc.hostport, r.Reason)
		}
	}
	r := tg.lastRefusal(t)
	if r.Name != "private.test" || r.Addr != netip.MustParseAddrPort("10.0.0.5:5432") {
		t.Errorf("refusal %+v does not name what was asked and the address", r)
	}

	// Without the operator's override, loopback is refused even to an
	// allowed name: DNS rebinding.
	closed := startGateway(t, dns, allowlist("rebind.test", "127.0.0.1"), func(c *Config) { c.Guard = &Guard{} })
	for _, hp := range []string{"rebind.test:" + up.port, "127.0.0.1:" + up.port} {
		c, resp, body := closed.connect(t, hp)
		if c != nil {
			c.Close()
			t.Fatalf("CONNECT %s allowed to loopback", hp)
		}
		wantRefused(t, resp, body, "loopback")
	}
	lr := closed.lastRefusal(t)
	if body := lr.Error(); body != "egress refused: 127.0.0.1:"+up.port+", loopback" {
		t.Errorf("refusal reads %q", body)
	}

	// Public policy: any address that passes the Guard.
	pub := startGateway(t, dns, Policy{Egress: Public}, func(c *Config) {
		c.Guard = &Guard{Reachable: loopbackReachable, Never: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:" + up.port)}}
	})
	c, resp, body = pub.connect(t, "other.test:"+up.port)
	if c != nil {
		c.Close()
		t.Fatal("CONNECT to an address in Never allowed")
	}
	wantRefused(t, resp, body, "berth itself")
	for hp, reason := range map[string]string{"meta.test:80": "cloud metadata", "10.1.2.3:80": "private range", "[::1]:80": "loopback"} {
		c, resp, body := pub.connect(t, hp)
		if c != nil {
			c.Close()
			t.Fatalf("CONNECT %s allowed", hp)
		}
		wantRefused(t, resp, body, reason)
	}
	none := startGateway(t, dns, Policy{Egress: None})
	_, resp, body = none.connect(t, "files.test:"+up.port)
	wantRefused(t, resp, body, "policy none")
}

func TestHTTPForward(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, allowlist("files.test"))
	client := tg.httpClient()

	req, _ := http.NewRequest(http.MethodGet, "http://files.test:"+up.port+"/hello", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Berth-Thing", "x")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "must not pass")
	req.Header.Set("X-End", "must pass")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "hello from upstream\n" {
		t.Fatalf("forwarded GET: %s %q", resp.Status, got)
	}
	h := *up.lastHdr.Load()
	for _, k := range []string{"Proxy-Authorization", "Proxy-Berth-Thing", "X-Hop", "X-Forwarded-For", "Forwarded"} {
		if v := h.Get(k); v != "" {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	if h.Get("X-End") != "must pass" {
		t.Errorf("end-to-end header lost: %v", h)
	}

	// Refused: 403 with the reason, never reaching the server.
	for url, reason := range map[string]string{
		"http://other.test:" + up.port + "/hello": "not in allowlist",
		"http://10.0.0.5/":                        "not in allowlist",
	} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantRefused(t, resp, string(body), reason)
	}
	tg.setPolicy(Policy{Egress: Public})
	resp, err = client.Get("http://private.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantRefused(t, resp, string(body), "private range")
}

func TestPolicyChangeAppliesAtOnce(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, allowlist("files.test"))
	client := tg.httpClient()
	url := "http://files.test:" + up.port + "/hello"

	resp, err := client.Get(url)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first GET: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c, resp, body := tg.connect(t, "files.test:"+up.port)
	if c == nil {
		t.Fatalf("first CONNECT: %s %s", resp.Status, body)
	}
	c.Close()

	tg.setPolicy(Policy{Egress: None})
	// The proxy client keeps its connection to the gateway, and the
	// gateway its pooled one upstream; the request is still decided anew.
	resp, err = client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantRefused(t, resp, string(body2), "policy none")
	_, resp, body = tg.connect(t, "files.test:"+up.port)
	wantRefused(t, resp, body, "policy none")

	tg.setPolicy(allowlist("other.test"))
	_, resp, body = tg.connect(t, "files.test:"+up.port)
	wantRefused(t, resp, body, "not in allowlist")
	if c, resp, body := tg.connect(t, "other.test:"+up.port); c == nil {
		t.Fatalf("CONNECT after the allowlist changed: %s %s", resp.Status, body)
	} else {
		c.Close()
	}
}

func TestHostileHTTP(t *testing.T) {
	dns := startTestDNS(t, testZone)
	tg := startGateway(t, dns, Policy{Egress: Public})
	exchange := func(send string) string {
		t.Helper()
		c, err := net.Dial("tcp", tg.proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(timeAfter(10))
		go func() { io.WriteString(c, send) }()
		got, _ := io.ReadAll(io.LimitReader(c, 4096))
		return string(got)
	}
	for _, tc := range []struct {
		name, send, want string
	}{
		{"garbage", "\x00\x01\x02garbage\r\n\r\n", "400 Bad Request"},
		{"origin-form", "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "400 Bad Request"},
		{"https absolute", "GET https://files.test/ HTTP/1.1\r\nHost: files.test\r\nConnection: close\r\n\r\n", "use CONNECT"},
		{"huge header", "GET http://files.test/ HTTP/1.1\r\nHost: files.test\r\nX-Big: " + strings.Repeat("a", 200<<10) + "\r\n\r\n", "431"},
		{"connect without port", "CONNECT files.test HTTP/1.1\r\nHost: files.test\r\n\r\n", "400 Bad Request"},
		{"connect port 0", "CONNECT files.test:0 HTTP/1.1\r\nHost: files.test:0\r\n\r\n", "400 Bad Request"},
		{"connect bad name", "CONNECT b%25d..name:443 HTTP/1.1\r\nHost: b%25d..name:443\r\n\r\n", "invalid name"},
	} {
		got := exchange(tc.send)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: answer %q, want %q in it", tc.name, firstLine(got), tc.want)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
