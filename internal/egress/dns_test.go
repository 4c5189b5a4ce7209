package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// sandboxResolver asks the gateway's DNS, as a sandbox's resolv.conf
// (nameserver 127.0.0.1) makes its tools do, over UDP or TCP.
func (tg *testGateway) sandboxResolver(network string) *net.Resolver {
	addr := tg.dnsUDP
	if network == "tcp" {
		addr = tg.dnsTCP
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// query sends one raw message over UDP and parses the answer.
func (tg *testGateway) query(t *testing.T, msg []byte) (dnsmessage.Header, []dnsmessage.Resource, bool) {
	t.Helper()
	c, err := net.Dial("udp", tg.dnsUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(msg)
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return dnsmessage.Header{}, nil, false
	}
	var p dnsmessage.Parser
	h, err := p.Start(buf[:n])
	if err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	p.SkipAllQuestions()
	rrs, _ := p.AllAnswers()
	return h, rrs, true
}

func question(name string, typ dnsmessage.Type) dnsmessage.Question {
	return dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}
}

func buildQuery(h dnsmessage.Header, qs ...dnsmessage.Question) []byte {
	b := dnsmessage.NewBuilder(nil, h)
	b.StartQuestions()
	for _, q := range qs {
		b.Question(q)
	}
	out, _ := b.Finish()
	return out
}

func TestDNS(t *testing.T) {
	zone := map[string][]string{"dual.test": {"127.0.0.7", "::1"}}
	for k, v := range testZone {
		zone[k] = v
	}
	var many []string
	for i := range 60 {
		many = append(many, fmt.Sprintf("127.0.1.%d", i+1))
	}
	zone["many.test"] = many
	dns := startTestDNS(t, zone)
	tg := startGateway(t, dns, allowlist("files.test", "*.github.test:443", "rebind.test", "private.test", "meta.test", "dual.test", "many.test", "nosuch.test"))
	ctx := context.Background()

	for _, network := range []string{"udp", "tcp"} {
		r := tg.sandboxResolver(network)
		for name, want := range map[string][]string{
			"files.test":      {"127.0.0.1"},
			"FILES.TEST.":     {"127.0.0.1"},
			"api.github.test": {"127.0.0.1"}, // a question has no port: *.github.test:443 matches
			"dual.test":       {"127.0.0.7"}, // ::1 is not reachable: left out of the answer
		} {
			ips, err := r.LookupNetIP(ctx, "ip", name)
			var got []string
			for _, ip := range ips {
				got = append(got, ip.String())
			}
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: lookup %s = %v, %v; want %v", network, name, got, err, want)
			}
		}
		before := tg.refusalCount()
		for name, reason := range map[string]string{"other.test": "not in allowlist", "private.test": "private range", "meta.test": "cloud metadata"} {
			_, err := r.LookupNetIP(ctx, "ip4", name)
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("%s: lookup %s: %v, want not found", network, name, err)
			}
			if ref := tg.lastRefusal(t); ref.Reason != reason || ref.Name != name {
				t.Errorf("%s: lookup %s reported %+v, want reason %q", network, name, ref, reason)
			}
		}
		if n := tg.refusalCount() - before; n != 3 {
			t.Errorf("%s: %d refusals for 3 refused names", network, n)
		}
		// A name that does not exist is not a refusal.
		before = tg.refusalCount()
		if _, err := r.LookupNetIP(ctx, "ip4", "nosuch.test"); err == nil {
			t.Errorf("%s: nosuch.test resolved", network)
		}
		if tg.refusalCount() != before {
			t.Errorf("%s: a missing name was reported as refused", network)
		}
	}

	// Raw messages: the answers a resolver library would not show.
	h, rrs, ok := tg.query(t, buildQuery(dnsmessage.Header{ID: 7, RecursionDesired: true}, question("files.test.", dnsmessage.TypeA)))
	if !ok || h.ID != 7 || !h.Response || h.RCode != dnsmessage.RCodeSuccess || len(rrs) != 1 || rrs[0].Header.TTL != 30 {
		t.Errorf("A files.test: %+v %v", h, rrs)
	}
	// The sandbox's loopback is its own; Go's resolver would read
	// /etc/hosts instead of asking.
	h, rrs, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 14}, question("localhost.", dnsmessage.TypeAAAA)))
	if !ok || h.RCode != dnsmessage.RCodeSuccess || len(rrs) != 1 || rrs[0].Body.(*dnsmessage.AAAAResource).AAAA != netip.IPv6Loopback().As16() {
		t.Errorf("AAAA localhost: %+v %v", h, rrs)
	}
	h, rrs, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 8}, question("files.test.", dnsmessage.TypeTXT)))
	if !ok || h.RCode != dnsmessage.RCodeSuccess || len(rrs) != 0 {
		t.Errorf("TXT files.test: %+v %v, want an empty answer", h, rrs)
	}
	h, _, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 9}, question("other.test.", dnsmessage.TypeAAAA)))
	if !ok || h.RCode != dnsmessage.RCodeNameError {
		t.Errorf("AAAA other.test: %+v, want NXDOMAIN", h)
	}
	h, _, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 10}, question("files.test.", dnsmessage.TypeA), question("other.test.", dnsmessage.TypeA)))
	if !ok || h.RCode != dnsmessage.RCodeFormatError {
		t.Errorf("two questions: %+v, want FORMERR", h)
	}
	h, _, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 11, OpCode: 2}, question("files.test.", dnsmessage.TypeA)))
	if !ok || h.RCode != dnsmessage.RCodeNotImplemented {
		t.Errorf("opcode 2: %+v, want NOTIMP", h)
	}
	// 60 addresses do not fit 512 bytes: truncated over UDP, whole over TCP.
	h, rrs, ok = tg.query(t, buildQuery(dnsmessage.Header{ID: 12}, question("many.test.", dnsmessage.TypeA)))
	if !ok || !h.Truncated || len(rrs) != 0 {
		t.Errorf("many.test over UDP: %+v, %d records; want truncated", h, len(rrs))
	}
	if ips, err := tg.sandboxResolver("tcp").LookupNetIP(ctx, "ip4", "many.test"); err != nil || len(ips) != 60 {
		t.Errorf("many.test over TCP: %d addresses, %v", len(ips), err)
	}
	// Garbage and responses get no answer, and the server goes on.
	for _, junk := range [][]byte{{1, 2, 3}, make([]byte, 3000), buildQuery(dnsmessage.Header{ID: 13, Response: true}, question("files.test.", dnsmessage.TypeA))} {
		c, _ := net.Dial("udp", tg.dnsUDP)
		c.Write(junk)
		c.Close()
	}
	if _, err := tg.sandboxResolver("udp").LookupNetIP(ctx, "ip4", "files.test"); err != nil {
		t.Errorf("after garbage: %v", err)
	}
	// A TCP length the gateway will not read: the connection is closed.
	c, err := net.Dial("tcp", tg.dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{0xff, 0xff, 0, 0, 0})
	if n, err := c.Read(make([]byte, 10)); err == nil || isTimeout(err) {
		t.Errorf("oversized TCP message: read %d, %v; want the connection closed", n, err)
	}
}

// TestRememberedAnswer: a tool that resolves an allowed name through the
// gateway's DNS and then connects to the address is let through, as the
// name; the address alone is not.
func TestRememberedAnswer(t *testing.T) {
	dns := startTestDNS(t, testZone)
	up := startUpstream(t, false)
	tg := startGateway(t, dns, allowlist("files.test:"+up.port))

	_, resp, body := tg.connect(t, "127.0.0.1:"+up.port)
	wantRefused(t, resp, body, "not in allowlist")

	ips, err := tg.sandboxResolver("udp").LookupNetIP(context.Background(), "ip4", "files.test")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("lookup: %v %v", ips, err)
	}
	c, resp, body := tg.connect(t, "127.0.0.1:"+up.port)
	if c == nil {
		t.Fatalf("CONNECT to the address the gateway answered for an allowed name: %s %s", resp.Status, body)
	}
	if resp, got, err := get(t, c, "files.test", "/hello"); err != nil || resp.StatusCode != 200 || string(got) != "hello from upstream\n" {
		t.Errorf("GET: %v %q %v", resp, got, err)
	}
	c.Close()
	// Only on the entry's port.
	_, resp, body = tg.connect(t, "127.0.0.1:1")
	wantRefused(t, resp, body, "not in allowlist")
	// And only while the name is still allowed.
	tg.setPolicy(allowlist("other.test"))
	_, resp, body = tg.connect(t, "127.0.0.1:"+up.port)
	wantRefused(t, resp, body, "not in allowlist")
}
