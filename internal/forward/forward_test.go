package forward

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// seen is what the echo backend reports about the request it got.
type seen struct {
	Method      string      `json:"method"`
	Path        string      `json:"path"`
	EscapedPath string      `json:"escaped_path"`
	Query       string      `json:"query"`
	Host        string      `json:"host"`
	Header      http.Header `json:"header"`
	Body        string      `json:"body"`
}

func echoBackend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Agent", "yes")
		w.Header().Add("Set-Cookie", "agent=1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		_ = json.NewEncoder(w).Encode(seen{
			Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Host: r.Host, Header: r.Header, Body: string(body),
		})
	})
}

func TestForwardPreservesRequestAndResponse(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			ep := startBackend(t, network, echoBackend())
			front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)

			req, err := http.NewRequest(http.MethodPut, front.URL+"/fwd/api/x%20y/z?a=1&b=two&a=3", strings.NewReader("hello agent"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer caller-secret")
			req.Header.Set("Cookie", "berth=caller-cookie")
			req.Header.Set("Berth-Session-Token", "caller-session")
			req.Header.Set("Berth-Agent-Token", "caller-guess")
			req.Header.Set("Proxy-Authorization", "Basic caller")
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Port", "6666")
			req.Header.Set("X-Forwarded-Host", "evil.example")
			req.Header.Set("Forwarded", "for=6.6.6.6")
			req.Header.Set("X-Custom", "kept")
			req.Header.Add("X-Multi", "one")
			req.Header.Add("X-Multi", "two")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()

			if resp.StatusCode != http.StatusTeapot {
				t.Errorf("status = %d, want 418", resp.StatusCode)
			}
			if got := resp.Header.Get("X-Agent"); got != "yes" {
				t.Errorf("response X-Agent = %q, want yes", got)
			}
			if got := resp.Header.Values("Set-Cookie"); len(got) > 0 {
				t.Errorf("response Set-Cookie = %q, want it dropped", got)
			}
			var s seen
			if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
				t.Fatal(err)
			}
			if s.Method != http.MethodPut || s.Path != "/api/x y/z" || s.EscapedPath != "/api/x%20y/z" {
				t.Errorf("backend got %s %q (escaped %q), want PUT /api/x y/z", s.Method, s.Path, s.EscapedPath)
			}
			if s.Query != "a=1&b=two&a=3" {
				t.Errorf("backend query = %q", s.Query)
			}
			if s.Body != "hello agent" {
				t.Errorf("backend body = %q", s.Body)
			}
			if s.Host != agentHost {
				t.Errorf("backend Host = %q, want %q", s.Host, agentHost)
			}
			h := s.Header
			if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+testToken {
				t.Errorf("backend Authorization = %q, want only the agent token", got)
			}
			for _, k := range []string{"Cookie", "Berth-Session-Token", "Berth-Agent-Token", "Proxy-Authorization", "X-Forwarded-Port", "Forwarded"} {
				if v := h.Values(k); len(v) > 0 {
					t.Errorf("backend got caller header %s: %q", k, v)
				}
			}
			if got := h.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
				t.Errorf("backend X-Forwarded-For = %q, want fresh 127.0.0.1", got)
			}
			if got := h.Get("X-Forwarded-Proto"); got != "http" {
				t.Errorf("backend X-Forwarded-Proto = %q, want http", got)
			}
			if got := h.Get("X-Forwarded-Host"); got == "evil.example" {
				t.Errorf("backend X-Forwarded-Host = %q, the caller's claim", got)
			}
			if got := h.Get("X-Custom"); got != "kept" {
				t.Errorf("backend X-Custom = %q, want kept", got)
			}
			if got := h.Values("X-Multi"); len(got) != 2 {
				t.Errorf("backend X-Multi = %q, want both values", got)
			}
			for _, secret := range []string{"caller-secret", "caller-cookie", "caller-session"} {
				raw, _ := json.Marshal(h)
				if strings.Contains(string(raw), secret) {
					t.Errorf("caller secret %q reached the backend: %s", secret, raw)
				}
			}
		})
	}
}

// unreachable returns endpoints where nothing listens: a unix socket path
// that does not exist and a TCP port that was just closed.
func unreachable(t *testing.T) []runtime.Endpoint {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return []runtime.Endpoint{
		{Network: "unix", Address: filepath.Join(t.TempDir(), "gone.sock")},
		{Network: "tcp", Address: addr},
	}
}

func TestForwardBackendDown(t *testing.T) {
	for _, ep := range unreachable(t) {
		t.Run(ep.Network, func(t *testing.T) {
			front := startFront(t, newForwarder(t, nil), Target{ServerID: "srv-down", Endpoint: ep, Token: testToken}, nil)
			resp, err := http.Get(front.URL + "/fwd/api/health")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body wire.Error
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadGateway || body.Error.Code != wire.CodeBadGateway {
				t.Fatalf("got %d %+v, want 502 bad_gateway", resp.StatusCode, body.Error)
			}
			if !strings.Contains(body.Error.Message, "cannot reach server srv-down") {
				t.Errorf("message %q does not name the server", body.Error.Message)
			}
			if strings.Contains(body.Error.Message, ep.Address) {
				t.Errorf("message %q leaks the endpoint address", body.Error.Message)
			}
		})
	}
}

func TestDo(t *testing.T) {
	ep := startBackend(t, "unix", echoBackend())
	f := newForwarder(t, nil)
	target := Target{ServerID: "s1", Endpoint: ep, Token: testToken}

	h := http.Header{}
	h.Set("Authorization", "Bearer caller-secret")
	h.Set("Berth-Session-Token", "caller-session")
	h.Set("Content-Type", "application/json")
	resp, err := f.Do(context.Background(), target, http.MethodPost, "api/tools/bash?timeout=5&x=a%20b", h, strings.NewReader(`{"command":"true"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status = %d, want the backend's 418", resp.StatusCode)
	}
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Method != http.MethodPost || s.Path != "/api/tools/bash" || s.Query != "timeout=5&x=a%20b" || s.Body != `{"command":"true"}` {
		t.Errorf("backend got %s %s ? %s %q", s.Method, s.Path, s.Query, s.Body)
	}
	if got := s.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+testToken {
		t.Errorf("backend Authorization = %q, want only the agent token", got)
	}
	if v := s.Header.Get("Berth-Session-Token"); v != "" {
		t.Errorf("backend got Berth-Session-Token %q", v)
	}
	if got := s.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("backend Content-Type = %q", got)
	}
	if h.Get("Authorization") != "Bearer caller-secret" {
		t.Error("Do changed the caller's header map")
	}
}

func TestDoErrors(t *testing.T) {
	f := newForwarder(t, nil)
	for _, ep := range unreachable(t) {
		_, err := f.Do(context.Background(), Target{ServerID: "srv-down", Endpoint: ep}, http.MethodGet, "api/health", nil, nil)
		if err == nil {
			t.Fatalf("%s: Do to nothing succeeded", ep.Network)
		}
		d := wire.DetailOf(err)
		if d.Code != wire.CodeBadGateway || !strings.Contains(d.Message, "srv-down") {
			t.Errorf("%s: Do error = %+v, want bad_gateway naming srv-down", ep.Network, d)
		}
	}

	ep := startBackend(t, "tcp", echoBackend())
	_, err := f.Do(context.Background(), Target{ServerID: "s1", Endpoint: ep}, http.MethodGet, "../x", nil, nil)
	if d := wire.DetailOf(err); err == nil || d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "s1") {
		t.Errorf("Do with escaping path: %v, want bad_request naming s1", err)
	}
	_, err = f.Do(context.Background(), Target{ServerID: "s1", Endpoint: ep}, "BAD METHOD", "api", nil, nil)
	if err == nil {
		t.Error("Do accepted an invalid method")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.Do(ctx, Target{ServerID: "s1", Endpoint: ep}, http.MethodGet, "api", nil, nil)
	if !errors.Is(err, context.Canceled) || wire.DetailOf(err).Code == wire.CodeBadGateway {
		t.Errorf("Do with a cancelled context: %v, want context.Canceled and not bad_gateway", err)
	}
}

// TestForwardCallerGoneIsNotAnError cancels the caller both while the agent
// has not answered yet and in the middle of a streamed body, and checks
// that nothing is logged at warning level or above.
func TestForwardCallerGoneIsNotAnError(t *testing.T) {
	for _, stage := range []string{"before-headers", "mid-body"} {
		t.Run(stage, func(t *testing.T) {
			reached := make(chan struct{}, 1)
			backendDone := make(chan struct{}, 1)
			ep := startBackend(t, "unix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { backendDone <- struct{}{} }()
				if stage == "mid-body" {
					_, _ = io.WriteString(w, "first chunk\n")
					http.NewResponseController(w).Flush()
				}
				reached <- struct{}{}
				<-r.Context().Done()
			}))
			rec := &recordingHandler{}
			frontDone := make(chan struct{}, 1)
			front := startFront(t, newForwarder(t, slog.New(rec)), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, frontDone)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/fwd/api/stream", nil)
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			waitFor(t, reached, "backend to get the request")
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v, want context.Canceled", err)
			}
			waitFor(t, backendDone, "backend to see the cancellation")
			waitFor(t, frontDone, "forwarder to return")
			if msgs := rec.atLeast(slog.LevelWarn); len(msgs) > 0 {
				t.Errorf("caller going away was logged as a problem: %q", msgs)
			}
		})
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestProxyErrorDoesNotWriteTwice checks that a failure reported after the
// response has started leaves the response alone.
func TestProxyErrorDoesNotWriteTwice(t *testing.T) {
	rec := &recordingHandler{}
	f := &Forwarder{Transports: NewTransports(), Logger: slog.New(rec)}
	r := httptest.NewRequest(http.MethodGet, "/", nil)

	w := httptest.NewRecorder()
	tw := &trackingWriter{ResponseWriter: w}
	tw.WriteHeader(http.StatusOK)
	_, _ = tw.Write([]byte("partial"))
	f.proxyError(tw, r, "s1", errors.New("backend hung up"))
	if w.Code != http.StatusOK || w.Body.String() != "partial" {
		t.Errorf("after a late error the response is %d %q, want 200 partial", w.Code, w.Body.String())
	}
	if msgs := rec.atLeast(slog.LevelWarn); len(msgs) != 1 {
		t.Errorf("late error logged %q, want one warning", msgs)
	}

	w = httptest.NewRecorder()
	f.proxyError(&trackingWriter{ResponseWriter: w}, r, "s1", errors.New("backend hung up"))
	if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"bad_gateway"`) {
		t.Errorf("early error answered %d %q, want 502 bad_gateway", w.Code, w.Body.String())
	}
}
