package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestServeLeavesNothing: when Serve's context ends, every listener and
// connection is closed and no goroutine of the gateway is left, whatever
// state the sandbox's connections were in.
func TestServeLeavesNothing(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	hp := "files.test:" + up.port
	baseline := runtime.NumGoroutine()

	tg := startGateway(t, dns, allowlist("files.test"), func(c *Config) { c.Limits.BytesPerSecond = 64 << 10 })
	var clients []net.Conn
	dial := func(addr, network string) net.Conn {
		c, err := net.Dial(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// An open tunnel in the middle of a rate-limited download.
	tunnel, resp, body := tg.connect(t, hp)
	if tunnel == nil {
		t.Fatalf("CONNECT: %s %s", resp.Status, body)
	}
	clients = append(clients, tunnel)
	fmt.Fprintf(tunnel, "GET /bytes/%d HTTP/1.1\r\nHost: files.test\r\n\r\n", 8<<20)
	if _, err := io.ReadFull(tunnel, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	// A connection that never sent its first byte.
	dial(tg.proxy, "tcp")
	// A SOCKS5 handshake stopped half way.
	s := dial(tg.proxy, "tcp")
	s.Write([]byte{5, 1, 0})
	io.ReadFull(s, make([]byte, 2))
	// An HTTP keep-alive connection with one forwarded request done.
	h := dial(tg.proxy, "tcp")
	fmt.Fprintf(h, "GET http://%s/hello HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
	if _, err := io.ReadFull(h, make([]byte, 12)); err != nil {
		t.Fatal(err)
	}
	// An HTTP request whose headers never end.
	p := dial(tg.proxy, "tcp")
	fmt.Fprintf(p, "GET http://%s/hello HTTP/1.1\r\nHost: ", hp)
	// A DNS over TCP connection, idle.
	dial(tg.dnsTCP, "tcp")

	stopped := make(chan struct{})
	go func() {
		tg.stop(t)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
	// The sandbox's side sees every connection closed.
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("connection %d not closed by Serve's end: %v", i, err)
		}
	}
	for _, c := range clients {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Serve returned, %d before it started:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeEndsWhenAListenerCloses: the caller may end a gateway by
// closing its listeners (the sandbox's namespace going away).
func TestServeEndsWhenAListenerCloses(t *testing.T) {
	l := listen(t)
	g := NewGateway(Config{Guard: &Guard{}})
	done := make(chan error, 1)
	go func() { done <- g.Serve(context.Background(), l, nil, nil) }()
	// Serve may not have started accepting; closing works either way.
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its listener closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its listener closed")
	}
	if err := g.Serve(context.Background(), listen(t), nil, nil); err == nil {
		t.Error("a Gateway served twice")
	}
}
