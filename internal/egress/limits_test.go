package egress

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConnectionLimit(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, allowlist("files.test"), func(c *Config) { c.Limits.Connections = 2 })
	hp := "files.test:" + up.port

	var open []net.Conn
	for range 2 {
		c, resp, body := tg.connect(t, hp)
		if c == nil {
			t.Fatalf("CONNECT within the limit: %s %s", resp.Status, body)
		}
		open = append(open, c)
	}
	_, resp, body := tg.connect(t, hp)
	wantRefused(t, resp, body, "connection limit")
	if _, err := socksGet(t, tg, hp); err == nil {
		t.Fatal("SOCKS5 connection over the limit allowed")
	}
	if r := tg.lastRefusal(t); r.Reason != "connection limit" {
		t.Errorf("SOCKS5 over the limit: reason %q", r.Reason)
	}

	// A closed tunnel gives its slot back.
	open[0].Close()
	eventually(t, 5*time.Second, "a slot freed by a closed tunnel", func() bool {
		c, _, _ := tg.connect(t, hp)
		if c != nil {
			open[0] = c
		}
		return c != nil
	})
	for _, c := range open {
		c.Close()
	}
	eventually(t, 5*time.Second, "closed tunnels giving their slots back", func() bool { return tg.g.upstreams.Load() == 0 })
	// Pooled forwarding connections do not keep slots from tunnels.
	client := tg.httpClient()
	for range 2 {
		resp, err := client.Get("http://" + hp + "/hello")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("forwarded GET: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	eventually(t, 5*time.Second, "CONNECT while the forwarder holds idle connections", func() bool {
		c, _, _ := tg.connect(t, hp)
		if c != nil {
			c.Close()
		}
		return c != nil
	})
}

func TestByteLimit(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	const limit = 256 << 10
	tg := startGateway(t, dns, allowlist("files.test"), func(c *Config) { c.Limits.Bytes = limit })
	hp := "files.test:" + up.port

	idle, resp, body := tg.connect(t, hp)
	if idle == nil {
		t.Fatalf("CONNECT: %s %s", resp.Status, body)
	}
	defer idle.Close()
	c, resp, body := tg.connect(t, hp)
	if c == nil {
		t.Fatalf("CONNECT: %s %s", resp.Status, body)
	}
	defer c.Close()
	resp, got, err := get(t, c, "files.test", "/bytes/"+strconv.Itoa(4<<20))
	if err == nil {
		t.Fatalf("4 MiB fetched whole past a %d-byte limit (status %v)", limit, resp.Status)
	}
	if len(got) >= limit {
		t.Errorf("%d bytes of body came through a %d-byte limit", len(got), limit)
	}
	if n := tg.g.Bytes(); n != limit {
		t.Errorf("Bytes() = %d, want the limit %d", n, limit)
	}
	if r := tg.lastRefusal(t); r.Reason != "byte limit" {
		t.Errorf("reason %q", r.Reason)
	}
	// Every open connection is cut, not only the one that used the bytes.
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("other tunnel still open after the byte limit: %d, %v", n, err)
	}
	_, resp, body = tg.connect(t, hp)
	wantRefused(t, resp, body, "byte limit")

	// Bytes used before a restart count.
	again := startGateway(t, dns, allowlist("files.test"), func(c *Config) { c.Limits.Bytes = limit; c.UsedBytes = limit })
	_, resp, body = again.connect(t, hp)
	wantRefused(t, resp, body, "byte limit")
	if n := again.g.Bytes(); n != limit {
		t.Errorf("Bytes() after a restart = %d", n)
	}
}

func TestBandwidthLimit(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	const rate, size = 1 << 20, 2 << 20
	tg := startGateway(t, dns, allowlist("files.test"), func(c *Config) { c.Limits.BytesPerSecond = rate })
	c, resp, body := tg.connect(t, "files.test:"+up.port)
	if c == nil {
		t.Fatalf("CONNECT: %s %s", resp.Status, body)
	}
	defer c.Close()
	start := time.Now()
	resp, got, err := get(t, c, "files.test", "/bytes/"+strconv.Itoa(size))
	elapsed := time.Since(start)
	if err != nil || len(got) != size {
		t.Fatalf("download: %d bytes, %v", len(got), err)
	}
	// A lower bound only: a slow machine may take longer, never shorter.
	if elapsed < 1500*time.Millisecond {
		t.Errorf("%d bytes at %d B/s took %v, want at least 1.5 s", size, rate, elapsed)
	}
	if n := tg.g.Bytes(); n < size {
		t.Errorf("Bytes() = %d after a %d-byte download", n, size)
	}
}
