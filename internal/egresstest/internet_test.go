//go:build linux

package egresstest

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The host reaches the internet's hosts through the routes Start adds,
// and the routes are for the slot's ranges only.
func TestHostRoutesToTheSlotOnly(t *testing.T) {
	inet := Start(t)
	out, err := exec.Command("ip", "-o", "route", "show", "dev", hostLinkName(inet.Slot)).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v %s", err, out)
	}
	routes := string(out)
	if !strings.Contains(routes, inet.Prefix.String()+" via "+inet.NSLink.String()) {
		t.Errorf("no route to %s via %s on the host:\n%s", inet.Prefix, inet.NSLink, routes)
	}
	out, err = exec.Command("ip", "-o", "-6", "route", "show", "dev", hostLinkName(inet.Slot)).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -6 route: %v %s", err, out)
	}
	if !strings.Contains(string(out), inet.Prefix6.String()+" via "+inet.NSLink6.String()) {
		t.Errorf("no route to %s via %s on the host:\n%s", inet.Prefix6, inet.NSLink6, out)
	}
	for name, a := range inet.Hosts {
		if !inet.Prefix.Contains(a) || !inet.Prefix6.Contains(inet.Hosts6[name]) {
			t.Errorf("%s is at %s and %s, outside the slot's %s and %s", name, a, inet.Hosts6[name], inet.Prefix, inet.Prefix6)
		}
	}
	for _, a := range []netip.Addr{inet.Addr("files.test"), inet.Addr6("files.test")} {
		body := get(t, "tcp", netip.AddrPortFrom(a, 80).String())
		if body != Hello {
			t.Errorf("GET /hello from %s: %q", a, body)
		}
	}
}

// When the test ends, the namespace, its link, the host's routes and any
// client are gone, and the slot is free again.
func TestCleanupRemovesEverything(t *testing.T) {
	var inet *Internet
	var client string
	t.Run("use", func(t *testing.T) {
		inet = Start(t)
		client = inet.Client(t).Namespace
		// A connection left open by a client must not keep the namespace.
		c, err := net.Dial("tcp", netip.AddrPortFrom(inet.Addr("files.test"), 80).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	})
	if inet == nil {
		t.Fatal("no internet was made")
	}
	if inet.lingered {
		t.Error("the namespace outlived its removal: something held it")
	}
	for _, name := range []string{inet.Namespace, client} {
		if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
			t.Errorf("namespace %s is still there (%v)", name, err)
		}
		if _, err := os.Stat(etcNetnsDir(name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", etcNetnsDir(name), err)
		}
	}
	if linkExists(hostLinkName(inet.Slot)) {
		t.Errorf("link %s is still there", hostLinkName(inet.Slot))
	}
	out, _ := exec.Command("ip", "route", "show", inet.Prefix.String()).CombinedOutput()
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("route to %s is still there: %s", inet.Prefix, out)
	}
	out, _ = exec.Command("ip", "-6", "route", "show", inet.Prefix6.String()).CombinedOutput()
	if strings.TrimSpace(string(out)) != "" {
		t.Errorf("route to %s is still there: %s", inet.Prefix6, out)
	}
	l, err := tryLock(inet.Slot)
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		t.Errorf("slot %d is still locked", inet.Slot)
	} else {
		l.release()
	}
}

// A crashed run's namespace and link are swept by the next holder of the
// slot.
func TestSweepRemovesLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ctx := context.Background()
	// Leave in a free slot what a crashed holder would have: a namespace
	// linked to the host.
	l, err := acquireSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := l.n
	leftover := namespacePrefix(slot) + "crashed"
	if err := ipCmd(ctx, "netns", "add", leftover); err != nil {
		t.Fatal(err)
	}
	if err := ipCmd(ctx, "link", "add", hostLinkName(slot), "type", "veth", "peer", "name", "x", "netns", leftover); err != nil {
		t.Fatal(err)
	}
	l.release()
	// Hold every other slot so that Start must take this one.
	for n := range Slots {
		if n == slot {
			continue
		}
		l, err := tryLock(n)
		if err != nil {
			t.Fatal(err)
		}
		if l != nil {
			defer l.release()
		}
	}
	inet := Start(t)
	if inet.Slot != slot {
		t.Skipf("another test binary took slot %d meanwhile", slot)
	}
	if _, err := os.Stat("/run/netns/" + leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover namespace %s is still there (%v)", leftover, err)
	}
	if body := get(t, "tcp", netip.AddrPortFrom(inet.Addr("files.test"), 80).String()); body != Hello {
		t.Errorf("the new internet in the swept slot does not answer: %q", body)
	}
}

// get fetches /hello from addr with a bare HTTP/1.0 request.
func get(t *testing.T, network, addr string) string {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /hello HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(resp), "\r\n\r\n")
	return body
}
