package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// socksGet fetches /hello from hostport through the gateway's SOCKS5
// port with x/net's client, which sends names unresolved (socks5h).
func socksGet(t *testing.T, tg *testGateway, hostport string) (string, error) {
	t.Helper()
	d, err := proxy.SOCKS5("tcp", tg.proxy, nil, &net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: d.(proxy.ContextDialer).DialContext,
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + hostport + "/hello")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestSOCKS5(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, allowlist("files.test"))

	for _, hp := range []string{"files.test:" + up.port, "FILES.test.:" + up.port} {
		if body, err := socksGet(t, tg, hp); err != nil || body != "hello from upstream\n" {
			t.Fatalf("SOCKS5 %s: %q %v", hp, body, err)
		}
	}
	tg.setPolicy(allowlist("127.0.0.1:" + up.port))
	if body, err := socksGet(t, tg, "127.0.0.1:"+up.port); err != nil || body != "hello from upstream\n" {
		t.Fatalf("SOCKS5 IPv4 address: %q %v", body, err)
	}

	for hp, reason := range map[string]string{
		"other.test:" + up.port: "not in allowlist",
		"127.0.0.3:" + up.port:  "not in allowlist",
		"files.test:" + up.port: "not in allowlist",
	} {
		_, err := socksGet(t, tg, hp)
		if err == nil || !strings.Contains(err.Error(), "not allowed by ruleset") {
			t.Fatalf("SOCKS5 %s: %v, want refused by ruleset", hp, err)
		}
		if r := tg.lastRefusal(t); r.Reason != reason {
			t.Errorf("SOCKS5 %s: reason %q", hp, r.Reason)
		}
	}

	// A name resolving to a refused address.
	tg.setPolicy(allowlist("private.test", "meta.test"))
	for hp, reason := range map[string]string{"private.test:80": "private range", "meta.test:80": "cloud metadata"} {
		if _, err := socksGet(t, tg, hp); err == nil || !strings.Contains(err.Error(), "not allowed by ruleset") {
			t.Fatalf("SOCKS5 %s: %v", hp, err)
		}
		if r := tg.lastRefusal(t); r.Reason != reason {
			t.Errorf("SOCKS5 %s: reason %q", hp, r.Reason)
		}
	}
}

// socksRaw speaks SOCKS5 by hand for what clients do not send.
type socksRaw struct {
	net.Conn
	r *bufio.Reader
}

func dialSOCKS(t *testing.T, tg *testGateway) *socksRaw {
	t.Helper()
	c, err := net.Dial("tcp", tg.proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &socksRaw{Conn: c, r: bufio.NewReader(c)}
}

// greet offers no-auth and expects it chosen.
func (s *socksRaw) greet(t *testing.T) {
	t.Helper()
	s.Write([]byte{5, 1, 0})
	var b [2]byte
	if _, err := io.ReadFull(s.r, b[:]); err != nil || b != [2]byte{5, 0} {
		t.Fatalf("greeting answered %v, %v", b, err)
	}
}

// reply reads a reply and returns its code.
func (s *socksRaw) reply(t *testing.T) byte {
	t.Helper()
	var b [10]byte
	if _, err := io.ReadFull(s.r, b[:]); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return b[1]
}

// closed reports whether the gateway closed the connection (no hang).
func (s *socksRaw) closed(t *testing.T) bool {
	t.Helper()
	_, err := s.r.ReadByte()
	return err == io.EOF || err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestSOCKS5Protocol(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, Policy{Egress: Public})
	port := make([]byte, 2)
	var p uint16
	for _, c := range up.port {
		p = p*10 + uint16(c-'0')
	}
	binary.BigEndian.PutUint16(port, p)

	t.Run("ipv6", func(t *testing.T) {
		s := dialSOCKS(t, tg)
		s.greet(t)
		// ::1 is loopback, which Reachable 127.0.0.0/8 does not cover.
		s.Write(append([]byte{5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, port...))
		if code := s.reply(t); code != socksNotAllowed {
			t.Errorf("CONNECT [::1]: reply %#x", code)
		}
		if r := tg.lastRefusal(t); r.Reason != "loopback" {
			t.Errorf("reason %q", r.Reason)
		}
	})
	t.Run("domain then data at once", func(t *testing.T) {
		s := dialSOCKS(t, tg)
		req := append([]byte{5, 1, 0, 3, byte(len("files.test"))}, "files.test"...)
		req = append(req, port...)
		// Greeting, request and the HTTP request in one write: the
		// gateway must not lose what it read ahead.
		msg := append([]byte{5, 1, 0}, req...)
		msg = append(msg, "GET /hello HTTP/1.1\r\nHost: files.test\r\nConnection: close\r\n\r\n"...)
		s.Write(msg)
		var b [2]byte
		io.ReadFull(s.r, b[:])
		if code := s.reply(t); code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		rest, _ := io.ReadAll(s.r)
		if !bytes.Contains(rest, []byte("hello from upstream")) {
			t.Errorf("tunnel answered %q", rest)
		}
	})
	t.Run("bind and udp associate", func(t *testing.T) {
		for _, cmd := range []byte{2, 3} {
			s := dialSOCKS(t, tg)
			s.greet(t)
			s.Write(append([]byte{5, cmd, 0, 1, 127, 0, 0, 1}, port...))
			if code := s.reply(t); code != socksCmdNotSupported {
				t.Errorf("command %d: reply %#x", cmd, code)
			}
			if !s.closed(t) {
				t.Errorf("command %d: connection left open", cmd)
			}
		}
	})
	t.Run("address type", func(t *testing.T) {
		s := dialSOCKS(t, tg)
		s.greet(t)
		s.Write([]byte{5, 1, 0, 9, 1, 2, 3, 4, 0, 80})
		if code := s.reply(t); code != socksAddrNotSupported {
			t.Errorf("reply %#x", code)
		}
	})
	t.Run("auth only", func(t *testing.T) {
		s := dialSOCKS(t, tg)
		s.Write([]byte{5, 1, 2})
		var b [2]byte
		if _, err := io.ReadFull(s.r, b[:]); err != nil || b != [2]byte{5, 0xff} {
			t.Errorf("answered %v %v, want no acceptable method", b, err)
		}
		if !s.closed(t) {
			t.Error("connection left open")
		}
	})
	t.Run("hostile lengths", func(t *testing.T) {
		for name, msg := range map[string][]byte{
			"no methods":    {5, 0},
			"bad version":   {5, 1, 0, 4, 1, 0, 1},
			"name length 0": {5, 1, 0, 5, 1, 0, 3, 0, 0, 80},
			"bad name":      append(append([]byte{5, 1, 0, 5, 1, 0, 3, 9}, "ev\x00l.test"...), 0, 80),
			"port 0":        append(append([]byte{5, 1, 0, 5, 1, 0, 3, 10}, "files.test"...), 0, 0),
		} {
			s := dialSOCKS(t, tg)
			s.Write(msg)
			// Whatever the gateway answers, it ends the connection.
			s.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(s.r); err != nil {
				t.Errorf("%s: %v (connection not closed)", name, err)
			}
		}
		// What the sandbox sent reaches events and logs as printable text.
		found := false
		tg.mu.Lock()
		for _, r := range tg.refusals {
			found = found || r.Reason == "invalid name" && r.Name == "ev?l.test"
		}
		tg.mu.Unlock()
		if !found {
			t.Errorf("no refusal of the bad name as printable text: %+v", tg.refusals)
		}
	})
	t.Run("truncated then stall", func(t *testing.T) {
		// A name length of 255 followed by three bytes: the gateway waits
		// (bounded by its handshake timeout) and lets go when Serve ends.
		s := dialSOCKS(t, tg)
		s.Write([]byte{5, 1, 0, 5, 1, 0, 3, 255, 'a', 'b', 'c'})
		// The greeting's answer says the gateway is now reading the request.
		var b [2]byte
		if _, err := io.ReadFull(s.r, b[:]); err != nil {
			t.Fatal(err)
		}
		tg.stop(t)
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(s.r); err != nil {
			t.Errorf("stalled SOCKS connection not closed by Serve's end: %v", err)
		}
	})
}
