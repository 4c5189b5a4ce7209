//go:build linux

package netns_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/netns"
)

// A listener made in a fresh namespace is reachable only from there: the
// host's loopback does not reach it, a dial made in the namespace does.
func TestListenInAnotherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	name := "berth-netns-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v %s", err, out)
	}
	h, err := netns.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	l, err := h.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("inside"))
			c.Close()
		}
	}()
	c, err := h.Dial(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial inside: %v", err)
	}
	buf := make([]byte, 6)
	if _, err := c.Read(buf); err != nil || string(buf) != "inside" {
		t.Fatalf("read: %q %v", buf, err)
	}
	c.Close()
	// From the host's loopback the port is another socket or none: what
	// listens in the namespace never answers there.
	if c, err := new(net.Dialer).DialContext(ctx, "tcp", l.Addr().String()); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		if n, _ := c.Read(buf); string(buf[:n]) == "inside" {
			t.Fatal("the namespace's listener answered on the host's loopback")
		}
	}
}
