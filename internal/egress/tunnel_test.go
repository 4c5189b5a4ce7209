package egress

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l := listen(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// run starts tunnel between the gateway-side ends and reports its end.
func runTunnel(client, upstream net.Conn, idle time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		tunnel(client, upstream, idle)
		close(done)
	}()
	return done
}

func TestTunnelHalfClose(t *testing.T) {
	sandbox, gwClient := tcpPair(t)
	gwUp, server := tcpPair(t)
	done := runTunnel(gwClient, gwUp, time.Minute)

	// The sandbox sends its whole request and closes its sending side;
	// the server answers only after reading to the end.
	io.WriteString(sandbox, "request")
	sandbox.(*net.TCPConn).CloseWrite()
	server.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(server)
	if err != nil || string(got) != "request" {
		t.Fatalf("server read %q, %v", got, err)
	}
	io.WriteString(server, "answer")
	server.Close()
	sandbox.SetDeadline(time.Now().Add(10 * time.Second))
	got, err = io.ReadAll(sandbox)
	if err != nil || string(got) != "answer" {
		t.Fatalf("sandbox read %q, %v", got, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("tunnel did not end after both directions did")
	}
}

func TestTunnelIdle(t *testing.T) {
	const idle = 400 * time.Millisecond
	sandbox, gwClient := tcpPair(t)
	gwUp, server := tcpPair(t)
	start := time.Now()
	done := runTunnel(gwClient, gwUp, idle)

	// Traffic in one direction only keeps the tunnel open for many idle
	// periods: a long download does not send anything back.
	go func() {
		tick := time.NewTicker(idle / 4)
		defer tick.Stop()
		for range 10 {
			<-tick.C
			if _, err := server.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	sandbox.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(sandbox, make([]byte, 10)); err != nil {
		t.Fatalf("download cut while bytes flowed: %v after %v", err, time.Since(start))
	}
	// Then nothing: the tunnel ends by itself, closing both sides.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("idle tunnel not ended")
	}
	if _, err := sandbox.Read(make([]byte, 1)); err == nil {
		t.Error("sandbox side still open after the idle end")
	}
}
