package forward

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-mcp/berth/internal/wire"
)

// hostilePage is what a sandbox that took over its agent answers: an HTML
// page with script, cookies for berth's origin, origin-wide policies, a
// CORS grant, a private hop-by-hop header and a cookie in the trailers.
func hostilePage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html")
		h.Add("Set-Cookie", "__Host-berth_session=stolen; Path=/; Secure")
		h.Add("Set-Cookie", "other=1")
		h.Set("Set-Cookie2", "old=1")
		h.Set("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
		h.Set("Clear-Site-Data", `"cookies", "storage"`)
		h.Set("Alt-Svc", `h2="evil.example:443"`)
		h.Set("Service-Worker-Allowed", "/")
		h.Set("Access-Control-Allow-Origin", "https://evil.example")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Content-Security-Policy", "default-src *")
		h.Set("X-Content-Type-Options", "sniff-please")
		h.Set("Connection", "X-Private")
		h.Set("X-Private", "hop")
		h.Set("X-App", "kept")
		h.Set("Trailer", "Set-Cookie, X-Trail")
		_, _ = io.WriteString(w, "<html><script>fetch('/api/whoami')</script></html>")
		h.Set("Set-Cookie", "trailer=1")
		h.Set("X-Trail", "kept")
		h.Set(http.TrailerPrefix+"Set-Cookie2", "trailer=2")
	})
}

// wantSanitized fails unless h is what berth may relay of hostilePage's
// answer.
func wantSanitized(t *testing.T, where string, h http.Header) {
	t.Helper()
	for _, k := range []string{"Set-Cookie", "Set-Cookie2", "Strict-Transport-Security", "Clear-Site-Data", "Alt-Svc",
		"Service-Worker-Allowed", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "X-Private"} {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("%s: %s = %q reached the caller", where, k, v)
		}
	}
	if csp := h.Values("Content-Security-Policy"); !containsValue(csp, "sandbox") {
		t.Errorf("%s: Content-Security-Policy = %q, want sandbox among them", where, csp)
	}
	if got := h.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q, want nosniff only", where, got)
	}
	if h.Get("X-App") != "kept" || h.Get("Content-Type") != "text/html" {
		t.Errorf("%s: ordinary headers lost: %v", where, h)
	}
}

func containsValue(vs []string, want string) bool {
	for _, v := range vs {
		if v == want {
			return true
		}
	}
	return false
}

func TestForwardSanitizesResponses(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			ep := startBackend(t, network, hostilePage())
			target := Target{ServerID: "s1", Endpoint: ep, Token: testToken}
			f := newForwarder(t, nil)

			front := startFront(t, f, target, nil)
			client := &http.Client{Transport: f.RoundTripper(target, 1<<20)}
			paths := map[string]func() (*http.Response, error){
				"ServeHTTP": func() (*http.Response, error) { return http.Get(front.URL + "/fwd/page") },
				"Do": func() (*http.Response, error) {
					return f.Do(context.Background(), target, http.MethodGet, "page", nil, nil)
				},
				"RoundTripper": func() (*http.Response, error) { return client.Get("http://sandbox/page") },
			}
			for name, get := range paths {
				resp, err := get()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(body), "<script>") {
					t.Fatalf("%s: body %q, want the page itself", name, body)
				}
				wantSanitized(t, name, resp.Header)
				wantSanitized(t, name+" trailers", mergeOrdinary(t, resp.Trailer))
			}
		})
	}
}

// mergeOrdinary adds the headers wantSanitized expects in every response
// to a set of trailers, so that one check covers both.
func mergeOrdinary(t *testing.T, tr http.Header) http.Header {
	t.Helper()
	if tr.Get("X-Trail") != "kept" {
		t.Errorf("trailers %v: want X-Trail, or the check proves nothing", tr)
	}
	h := tr.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range tr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			h[strings.TrimPrefix(k, http.TrailerPrefix)] = v
		}
	}
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-App", "kept")
	h.Set("Content-Type", "text/html")
	return h
}

// TestRoundTripperPreparesRequests checks the client transport applies
// ServeHTTP's request rules: no caller credential or forwarding claim
// reaches the agent, only the agent token.
func TestRoundTripperPreparesRequests(t *testing.T) {
	ep := startBackend(t, "unix", echoBackend())
	f := newForwarder(t, nil)
	client := &http.Client{Transport: f.RoundTripper(Target{ServerID: "s1", Endpoint: ep, Token: testToken}, 1<<20)}
	req, _ := http.NewRequest(http.MethodPost, "http://sandbox/mcp", strings.NewReader("{}"))
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie", "Berth-Session-Token", "Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		req.Header.Set(k, "caller-secret")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(raw), "caller-secret") {
		t.Errorf("a caller header reached the agent: %s", raw)
	}
	if !strings.Contains(string(raw), "Bearer "+testToken) {
		t.Errorf("the agent token did not reach the agent: %s", raw)
	}
	if req.Header.Get("Authorization") != "caller-secret" {
		t.Error("RoundTrip changed the caller's request")
	}
}

// TestWebSocketHandshakeSanitized: browsers store cookies from a WebSocket
// handshake answer too, so the 101 is sanitized while the upgrade works.
func TestWebSocketHandshakeSanitized(t *testing.T) {
	ep := startBackend(t, "tcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "ws=1")
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		_ = c.Write(r.Context(), websocket.MessageText, []byte("hi"))
	}))
	front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/fwd/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "hi" {
		t.Fatalf("read: %q %v", msg, err)
	}
	if v := resp.Header.Values("Set-Cookie"); len(v) > 0 {
		t.Errorf("handshake Set-Cookie = %q reached the caller", v)
	}
	if resp.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Errorf("handshake CSP = %q", resp.Header.Get("Content-Security-Policy"))
	}
}

// TestHugeAnswerHeadersRefused: headers are read before any body limit
// applies, so the transport bounds them itself.
func TestHugeAnswerHeadersRefused(t *testing.T) {
	ep := startBackend(t, "unix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 200 {
			w.Header().Set("X-Big-"+strings.Repeat("x", i%10)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("y", 4<<10))
		}
		w.WriteHeader(http.StatusOK)
	}))
	f := newForwarder(t, nil)
	_, err := f.Do(context.Background(), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, http.MethodGet, "x", nil, nil)
	if d := wire.DetailOf(err); err == nil || d.Code != wire.CodeBadGateway || !strings.Contains(d.Message, "65536") {
		t.Fatalf("huge headers: %v, want bad_gateway naming the limit", err)
	}
}

// TestRedirectsStayOnBerthsOrigin: a sandbox's answer may redirect within
// berth's origin but not away from it, in none of the forms browsers
// read as another host.
func TestRedirectsStayOnBerthsOrigin(t *testing.T) {
	for loc, kept := range map[string]bool{
		"/api/servers/x/files": true, "next?page=2": true, "../up": true,
		"https://evil.example/login": false, "//evil.example/": false, `/\evil.example`: false,
		`\\evil.example`: false, "javascript:alert(1)": false, "/\t/evil.example": false, "http:evil.example": false,
	} {
		resp := &http.Response{StatusCode: http.StatusFound, Header: http.Header{"Location": {loc}, "Refresh": {"0; url=https://evil.example"}}}
		SanitizeResponse(resp)
		if got := resp.Header.Get("Location"); (got == loc) != kept {
			t.Errorf("Location %q: relayed as %q, want kept=%v", loc, got, kept)
		}
		if v := resp.Header.Get("Refresh"); v != "" {
			t.Errorf("Refresh %q reached the caller", v)
		}
	}
}
