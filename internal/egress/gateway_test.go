package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is a web server on loopback standing in for the internet:
// reachable through the gateway only when the test's Guard makes
// 127.0.0.0/8 reachable (the operator's override).
type upstream struct {
	*httptest.Server
	port    string
	lastHdr atomic.Pointer[http.Header]
}

func startUpstream(t testing.TB, tls bool) *upstream {
	t.Helper()
	u := &upstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		u.lastHdr.Store(&h)
		io.WriteString(w, "hello from upstream\n")
	})
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 32<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	u.Server = httptest.NewUnstartedServer(mux)
	// Tunnels the tests open and close without a TLS handshake are not news.
	u.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		u.StartTLS()
	} else {
		u.Start()
	}
	t.Cleanup(u.Close)
	_, u.port, _ = net.SplitHostPort(u.Listener.Addr().String())
	return u
}

// testGateway is a Gateway serving on loopback listeners, with its policy
// changeable and its refusals recorded.
type testGateway struct {
	g        *Gateway
	proxy    string // host:port of the proxy listener
	dnsUDP   string
	dnsTCP   string
	policy   atomic.Pointer[Policy]
	mu       sync.Mutex
	refusals []Refusal
	allowed  atomic.Int32
	cancel   context.CancelFunc
	done     chan error
}

var loopbackReachable = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func startGateway(t testing.TB, dns *testDNS, p Policy, configure ...func(*Config)) *testGateway {
	t.Helper()
	tg := &testGateway{done: make(chan error, 1)}
	tg.policy.Store(&p)
	pl := listen(t)
	dl := listen(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg.proxy, tg.dnsTCP, tg.dnsUDP = pl.Addr().String(), dl.Addr().String(), pc.LocalAddr().String()
	cfg := Config{
		Guard:  &Guard{Reachable: loopbackReachable},
		Policy: func(context.Context) (Policy, error) { return *tg.policy.Load(), nil },
		Refused: func(r Refusal) {
			tg.mu.Lock()
			tg.refusals = append(tg.refusals, r)
			tg.mu.Unlock()
		},
		Allowed: func() { tg.allowed.Add(1) },
	}
	if dns != nil {
		cfg.Resolver = dns.resolver()
	}
	for _, c := range configure {
		c(&cfg)
	}
	tg.g = NewGateway(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	tg.cancel = cancel
	go func() { tg.done <- tg.g.Serve(ctx, pl, pc, dl) }()
	t.Cleanup(func() { tg.stop(t) })
	return tg
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// stop ends Serve and waits for it, failing the test if it hangs.
func (tg *testGateway) stop(t testing.TB) {
	t.Helper()
	tg.cancel()
	select {
	case err, ok := <-tg.done:
		if ok && err != nil {
			t.Errorf("Serve: %v", err)
		}
		if ok {
			close(tg.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of its context ending")
	}
}

func (tg *testGateway) setPolicy(p Policy) { tg.policy.Store(&p) }

// lastRefusal returns the latest refusal, failing when there is none.
func (tg *testGateway) lastRefusal(t testing.TB) Refusal {
	t.Helper()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(tg.refusals) == 0 {
		t.Fatal("no refusal was reported")
	}
	return tg.refusals[len(tg.refusals)-1]
}

func (tg *testGateway) refusalCount() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return len(tg.refusals)
}

// httpClient sends everything through the gateway's proxy port.
func (tg *testGateway) httpClient() *http.Client {
	pu := &url.URL{Scheme: "http", Host: tg.proxy}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 20 * time.Second}
}

// connect sends CONNECT hostport on a new connection to the proxy. On 200
// it returns the tunnel; otherwise the response (body read) and nil.
func (tg *testGateway) connect(t testing.TB, hostport string) (net.Conn, *http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", tg.proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", hostport, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		return nil, resp, string(body)
	}
	return &bufConn{Conn: c, r: br}, resp, ""
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// get sends a plain HTTP/1.1 GET on c (a tunnel) and returns the body.
func get(t testing.TB, c net.Conn, host, path string) (*http.Response, []byte, error) {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// wantRefused checks a 403 answer and its reason.
func wantRefused(t testing.TB, resp *http.Response, body, reason string) {
	t.Helper()
	if resp == nil {
		t.Fatalf("no answer, want a refusal %q", reason)
	}
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusedHeader) != reason {
		t.Fatalf("answer %s %s=%q body %q, want 403 and reason %q", resp.Status, RefusedHeader, resp.Header.Get(RefusedHeader), body, reason)
	}
	if !strings.HasPrefix(body, "berth egress refused: ") || !strings.HasSuffix(body, "("+reason+")\n") || strings.Count(body, "\n") != 1 {
		t.Fatalf("refusal body %q is not one line naming %q", body, reason)
	}
}

var testZone = map[string][]string{
	"files.test":      {"127.0.0.1"},
	"api.github.test": {"127.0.0.1"},
	"other.test":      {"127.0.0.1"},
	"rebind.test":     {"127.0.0.1"},
	"private.test":    {"10.0.0.5"},
	"meta.test":       {"169.254.169.254"},
}

func allowlist(entries ...string) Policy { return Policy{Egress: Allowlist, Allow: entries} }

func timeAfter(seconds int) time.Time { return time.Now().Add(time.Duration(seconds) * time.Second) }
