//go:build linux

package egresstest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The internet's DNS answers for its hosts, the names that point where a
// gateway must not go, and the wildcard; over UDP and over TCP.
func TestDNSAnswers(t *testing.T) {
	inet := Start(t)
	for _, transport := range []string{"udp", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				// The Go resolver frames its queries for TCP whenever
				// the connection is not a packet one.
				return new(net.Dialer).DialContext(ctx, transport, inet.DNS)
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for name, want := range map[string][]netip.Addr{
				"files.test":    {inet.Addr("files.test"), inet.Addr6("files.test")},
				"PyPI.Test.":    {inet.Addr("pypi.test"), inet.Addr6("pypi.test")},
				"a.b.wild.test": {inet.Addr("files.test"), inet.Addr6("files.test")},
				"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
				"private.test":  {netip.MustParseAddr("10.0.0.5")},
				"meta.test":     {netip.MustParseAddr("169.254.169.254")},
				"ns.test":       {inet.Addr("ns.test"), inet.Addr6("ns.test")},
				"tls.test":      {inet.Addr("tls.test"), inet.Addr6("tls.test")},
				"git.test":      {inet.Addr("git.test"), inet.Addr6("git.test")},
				"npm.test":      {inet.Addr("npm.test"), inet.Addr6("npm.test")},
			} {
				got, err := r.LookupNetIP(ctx, "ip", name)
				if err != nil {
					t.Errorf("look up %s: %v", name, err)
					continue
				}
				slices.SortFunc(got, netip.Addr.Compare)
				slices.SortFunc(want, netip.Addr.Compare)
				if !slices.Equal(got, want) {
					t.Errorf("%s is %v, want %v", name, got, want)
				}
			}
			var dnsErr *net.DNSError
			if _, err := r.LookupNetIP(ctx, "ip", "nothing.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Errorf("nothing.test: %v, want not found", err)
			}
			// Not its zone: refused, not passed on to the real DNS.
			if addrs, err := r.LookupNetIP(ctx, "ip", "example.com"); err == nil {
				t.Errorf("example.com resolved to %v", addrs)
			}
		})
	}
}

// A name set during the test resolves at once; the IPv6 server answers
// too.
func TestDNSSetName(t *testing.T) {
	inet := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := netip.MustParseAddr("192.0.2.7")
	inet.SetName("new.test", want)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, network, inet.DNS6)
	}}
	got, err := r.LookupNetIP(ctx, "ip4", "new.test")
	if err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("new.test: %v %v, want %v", got, err, want)
	}
	if got, err := inet.Resolver().LookupNetIP(ctx, "ip4", "new.test"); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("new.test through Resolver: %v %v, want %v", got, err, want)
	}
}

// Garbage sent to the DNS server gets no answer or an error answer, and
// the server goes on answering real queries; a query for a name that
// exists without the asked type gets an empty answer with the zone's SOA.
func TestDNSHostileInput(t *testing.T) {
	inet := Start(t)
	c, err := net.Dial("udp", inet.DNS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, junk := range [][]byte{{}, {1}, make([]byte, 12), append(make([]byte, 12), 0xff, 0xff, 0xff), make([]byte, 4000)} {
		c.Write(junk)
	}
	// A header that claims a question it does not have: a FORMERR reply.
	bad := []byte{0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0}
	if m := exchange(t, c, bad); m.Header.ID != 0xbeef || m.Header.RCode != dnsmessage.RCodeFormatError {
		t.Errorf("reply to a broken query: %+v", m.Header)
	}
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName("rebind.test."), Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET}},
	}
	msg, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	m := exchange(t, c, msg)
	if m.Header.ID != 7 || m.Header.RCode != dnsmessage.RCodeSuccess || !m.Header.Authoritative || len(m.Answers) != 0 || len(m.Authorities) != 1 {
		t.Errorf("AAAA rebind.test: %+v, %d answers, %d authority", m.Header, len(m.Answers), len(m.Authorities))
	}
}

// exchange sends msg and returns the first reply to it (replies to what
// was sent before are skipped).
func exchange(t *testing.T, c net.Conn, msg []byte) dnsmessage.Message {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) == nil && m.Header.ID == uint16(msg[0])<<8|uint16(msg[1]) {
			return m
		}
	}
}
