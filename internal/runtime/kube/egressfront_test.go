package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime"
)

// frontEnv is the shared egress listeners of a runtime whose pod cache
// the test fills itself: sandbox pods "at" loopback addresses
// (127.0.0.2, ...), whose connections the test makes from there.
type frontEnv struct {
	r     *Runtime
	f     *egressFront
	idx   cache.Indexer
	up    string // host:port of a web server the policies may allow
	mu    sync.Mutex
	pol   map[string]egress.Policy
	calls map[string]int // hooks.Server calls by server
}

func newFrontEnv(t *testing.T, wait time.Duration) *frontEnv {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") }))
	t.Cleanup(web.Close)
	e := &frontEnv{idx: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podIPIndex: podIPs}),
		up: web.Listener.Addr().String(), pol: map[string]egress.Policy{}, calls: map[string]int{}}
	e.r = &Runtime{log: slog.New(slog.DiscardHandler), changes: newBroadcast(), indexers: []cache.Indexer{e.idx}}
	cfg, err := checkEgress(EgressOptions{Listen: "127.0.0.1:0", DNSListen: "127.0.0.1:0",
		Guard: &egress.Guard{Reachable: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	if e.f, err = listenEgress(e.r, cfg); err != nil {
		t.Fatal(err)
	}
	e.f.wait = wait
	t.Cleanup(e.f.close)
	e.f.start(runtime.EgressHooks{
		Server: func(_ context.Context, id string) (egress.Policy, int64, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			p, ok := e.pol[id]
			if !ok {
				return egress.Policy{}, 0, fmt.Errorf("no server %s", id)
			}
			e.calls[id]++
			return p, 0, nil
		},
		Refused: func(string, egress.Refusal) {},
		Allowed: func(string) {},
		Bytes:   func(context.Context, string, int64) error { return nil },
	})
	return e
}

// pod puts sandbox pod id at ip in the cache, with policy p.
func (e *frontEnv) pod(id, uid, ip string, p egress.Policy) *corev1.Pod {
	e.mu.Lock()
	e.pol[id] = p
	e.mu.Unlock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "sbx", UID: types.UID(uid)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}}
	e.idx.Update(pod)
	e.r.changes.changed()
	return pod
}

// get asks the proxy for the web server from source address src and
// returns the status, or 0 when the connection was closed unanswered.
func (e *frontEnv) get(t *testing.T, src string) int {
	t.Helper()
	c := e.dial(t, src)
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", e.up, e.up)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("from %s: no answer and not closed: %v", src, err)
	}
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (e *frontEnv) dial(t *testing.T, src string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", e.f.proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func allow(entries ...string) egress.Policy {
	return egress.Policy{Egress: egress.Allowlist, Allow: entries}
}

// TestEgressFrontAttributes: one proxy port serves every sandbox pod,
// each connection decided by the policy of the pod it comes from; a
// source that is no sandbox pod's is closed unanswered.
func TestEgressFrontAttributes(t *testing.T) {
	e := newFrontEnv(t, 2*time.Second)
	e.pod("s1", "u1", "127.0.0.2", allow("127.0.0.1"))
	e.pod("s2", "u2", "127.0.0.3", egress.Policy{Egress: egress.None})
	if got := e.get(t, "127.0.0.2"); got != http.StatusOK {
		t.Errorf("s1, whose allowlist has the server: %d", got)
	}
	if got := e.get(t, "127.0.0.3"); got != http.StatusForbidden {
		t.Errorf("s2, with egress none: %d", got)
	}
	began := time.Now()
	if got := e.get(t, "127.0.0.4"); got != 0 {
		t.Errorf("a source that is no sandbox's got %d", got)
	}
	if took := time.Since(began); took > e.f.wait+3*time.Second {
		t.Errorf("a source that is no sandbox's was closed after %s", took)
	}
	// A pod that ended, or is being deleted, is no source either.
	p := e.pod("s3", "u3", "127.0.0.5", allow("127.0.0.1"))
	p.Status.Phase = corev1.PodSucceeded
	e.idx.Update(p)
	if got := e.get(t, "127.0.0.5"); got != 0 {
		t.Errorf("an ended pod's address got %d", got)
	}
	// Two pods with one address (a cache behind a reused IP): neither.
	e.pod("s4", "u4", "127.0.0.2", allow("127.0.0.1"))
	if got := e.get(t, "127.0.0.2"); got != 0 {
		t.Errorf("an address two pods claim got %d", got)
	}
}

// TestEgressFrontWaitsForTheCache: a pod's first connection may come
// before its address reaches the cache; it is served once it does.
func TestEgressFrontWaitsForTheCache(t *testing.T) {
	e := newFrontEnv(t, time.Minute)
	c := e.dial(t, "127.0.0.2")
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", e.up, e.up)
	// The connection waits for its attribution.
	for end := time.Now().Add(10 * time.Second); len(e.f.attributing) == 0; {
		if time.Now().After(end) {
			t.Fatal("the connection from an unknown address is not waiting for its pod")
		}
		time.Sleep(time.Millisecond)
	}
	e.pod("s1", "u1", "127.0.0.2", allow("127.0.0.1"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the connection made before the pod was known: %v %v", resp, err)
	}
}

// TestEgressFrontFollowsPods: a pod replaced under its name gets a
// gateway of its own; a deleted pod's gateway stops and its open
// connections close.
func TestEgressFrontFollowsPods(t *testing.T) {
	e := newFrontEnv(t, 2*time.Second)
	e.pod("s1", "u1", "127.0.0.2", allow("127.0.0.1"))
	if got := e.get(t, "127.0.0.2"); got != http.StatusOK {
		t.Fatalf("s1: %d", got)
	}
	first := e.f.known(netip.MustParseAddr("127.0.0.2"))
	e.pod("s1", "u1b", "127.0.0.2", allow("127.0.0.1"))
	if got := e.get(t, "127.0.0.2"); got != http.StatusOK {
		t.Fatalf("s1's new pod: %d", got)
	}
	second := e.f.known(netip.MustParseAddr("127.0.0.2"))
	if second == nil || second == first {
		t.Fatal("the replaced pod kept its predecessor's gateway")
	}
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced pod's gateway did not stop")
	}
	// An open connection, which the pod's deletion closes.
	c := e.dial(t, "127.0.0.2")
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", e.up, e.up)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	e.f.podGone("s1", "u1b")
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && (err == nil || strings.Contains(err.Error(), "timeout")) {
		t.Errorf("a deleted pod's connection: %v, want it closed", err)
	}
	select {
	case <-second.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted pod's gateway did not stop")
	}
}

// TestEgressFrontDNS: the DNS port answers a sandbox pod over UDP and
// TCP, and nobody else.
func TestEgressFrontDNS(t *testing.T) {
	e := newFrontEnv(t, 200*time.Millisecond)
	e.pod("s1", "u1", "127.0.0.2", egress.Policy{Egress: egress.None})
	q := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	q.StartQuestions()
	q.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("localhost."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	msg, _ := q.Finish()
	ask := func(src string) (dnsmessage.Header, error) {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, e.f.dnsUDP.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Long for an answer, and how long a question nobody answers
		// is waited for.
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write(msg)
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			return dnsmessage.Header{}, err
		}
		var p dnsmessage.Parser
		return p.Start(buf[:n])
	}
	if h, err := ask("127.0.0.2"); err != nil || h.ID != 7 || !h.Response {
		t.Errorf("a sandbox's question over UDP: %+v %v", h, err)
	}
	if _, err := ask("127.0.0.9"); err == nil {
		t.Error("a question from no sandbox's address was answered")
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", e.f.dnsTCP.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append([]byte{0, byte(len(msg))}, msg...))
	var lenb [2]byte
	if _, err := io.ReadFull(c, lenb[:]); err != nil {
		t.Fatalf("a sandbox's question over TCP: %v", err)
	}
}
