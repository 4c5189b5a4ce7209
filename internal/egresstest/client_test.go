//go:build linux

package egresstest

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/netns"
)

// A client reaches the internet's hosts and nothing else: not the host
// (even at its end of the internet's link), not the machine's own DNS.
func TestClientReachesOnlyTheInternet(t *testing.T) {
	inet := Start(t)
	client := inet.Client(t)
	h, err := netns.Open("/run/netns/" + client.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Something that would answer on the host, on every address.
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(ap netip.AddrPort) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := h.Dial(ctx, "tcp", ap.String())
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, a := range []netip.Addr{inet.Addr("files.test"), inet.Addr6("files.test")} {
		if err := dial(netip.AddrPortFrom(a, 80)); err != nil {
			t.Errorf("the client cannot reach files.test at %s: %v", a, err)
		}
	}
	for _, a := range []netip.Addr{inet.HostLink, inet.HostLink6, netip.MustParseAddr("127.0.0.1")} {
		if err := dial(netip.AddrPortFrom(a, port)); err == nil {
			t.Errorf("the client reached the host's listener at %s", a)
		}
	}
}
