package observe_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/observe"
)

var generatedID = regexp.MustCompile(`^[0-9a-f]{24}$`)

// seenReq is what the test observer keeps of a request.
type seenReq struct {
	Method, Route string
	Status        int
	RequestID     string
}

// serve runs a chi router observed by the middleware and returns the
// observed requests as they end.
func serve(t *testing.T, routes func(chi.Router)) (*httptest.Server, func() []seenReq) {
	t.Helper()
	var mu sync.Mutex
	var seen []seenReq
	r := chi.NewRouter()
	r.Use(observe.Middleware(func(req *http.Request) (*http.Request, func(*observe.Request)) {
		return req, func(info *observe.Request) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, seenReq{Method: info.Method, Route: info.Route, Status: info.Status, RequestID: info.RequestID})
		}
	}))
	routes(r)
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	return ts, func() []seenReq {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenReq(nil), seen...)
	}
}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// A caller's request id is kept only when short and of safe characters
// (it reaches logs and traces); otherwise berth makes one. Either way
// the answer says which.
func TestRequestID(t *testing.T) {
	ts, _ := serve(t, func(r chi.Router) { r.Get("/", func(http.ResponseWriter, *http.Request) {}) })
	for _, id := range []string{"abc-123", "2f1e:9.x_Y", strings.Repeat("a", 128)} {
		if got := get(t, ts.URL, map[string]string{"X-Request-Id": id}).Header.Get("X-Request-Id"); got != id {
			t.Errorf("X-Request-Id %q answered %q, want it kept", id, got)
		}
	}
	seen := map[string]bool{}
	for _, id := range []string{"", strings.Repeat("a", 129), "a b", `x"y`, "a\tb", "ünï", "a=b;c", "../x"} {
		got := get(t, ts.URL, map[string]string{"X-Request-Id": id}).Header.Get("X-Request-Id")
		if !generatedID.MatchString(got) || seen[got] {
			t.Errorf("X-Request-Id %q answered %q, want a fresh random id", id, got)
		}
		seen[got] = true
	}
}

// The observer learns the route pattern (never the path), the status and
// the request id; an unmatched path has no route.
func TestMiddlewareReportsRouteAndStatus(t *testing.T) {
	ts, seen := serve(t, func(r chi.Router) {
		r.Get("/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
		r.Get("/plain", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	})
	get(t, ts.URL+"/things/42", map[string]string{"X-Request-Id": "r1"})
	get(t, ts.URL+"/plain", nil)
	get(t, ts.URL+"/nowhere/42", nil)
	got := seen()
	if len(got) != 3 {
		t.Fatalf("observed %d requests, want 3", len(got))
	}
	want := []seenReq{{Method: "GET", Route: "/things/{id}", Status: 201, RequestID: "r1"},
		{Method: "GET", Route: "/plain", Status: 200}, {Method: "GET", Route: "", Status: 404}}
	for i, w := range want {
		g := got[i]
		if g.Method != w.Method || g.Route != w.Route || g.Status != w.Status || (w.RequestID != "" && g.RequestID != w.RequestID) {
			t.Errorf("request %d observed as %+v, want %+v", i, g, w)
		}
	}
}

// Event streams flush and WebSockets hijack through the observed writer.
func TestFlushAndHijackReachTheConnection(t *testing.T) {
	ts, seen := serve(t, func(r chi.Router) {
		r.Get("/stream", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
		})
		r.Get("/upgrade", func(w http.ResponseWriter, _ *http.Request) {
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
			brw.Flush()
		})
	})
	get(t, ts.URL+"/stream", nil)
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n"))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 101") {
		t.Fatalf("upgrade answered %q, %v", line, err)
	}
	// The hijacking handler is observed once it returned.
	for end := time.Now().Add(10 * time.Second); len(seen()) < 2 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	status := map[string]int{}
	for _, r := range seen() {
		status[r.Route] = r.Status
	}
	if len(status) != 2 || status["/stream"] != 200 || status["/upgrade"] != http.StatusSwitchingProtocols {
		t.Errorf("observed %v, want a 200 stream and a 101 upgrade", status)
	}
}

// Joined hooks nest: the second runs inside the first's context and
// ends first; nil hooks are skipped, and a nil hook binds to a no-op.
func TestJoinNestsAndEndsInReverse(t *testing.T) {
	type key struct{}
	var events []string
	hook := func(tag string) observe.Hook {
		return func(name string) observe.Start {
			return func(ctx context.Context) (context.Context, observe.Done) {
				parent, _ := ctx.Value(key{}).(string)
				events = append(events, tag+" starts "+name+" in "+parent)
				return context.WithValue(ctx, key{}, tag), func(err error) { events = append(events, tag+" ends: "+err.Error()) }
			}
		}
	}
	start := observe.Join(hook("a"), nil, hook("b")).Bind("x")
	_, done := start(context.Background())
	done(errors.New("boom"))
	want := "a starts x in |b starts x in a|b ends: boom|a ends: boom"
	if got := strings.Join(events, "|"); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	ctx := context.Background()
	if got, done := observe.Hook(nil).Bind("x")(ctx); got != ctx || done == nil {
		t.Errorf("a nil hook changed the context or gave no done")
	}
}
