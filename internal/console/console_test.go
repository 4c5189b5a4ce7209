package console_test

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/console"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
)

var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// deadline bounds every wait: generous, for a busy machine.
const deadline = 90 * time.Second

// env is the console served as `berth serve` serves it (behind the REST
// API's router), on a real orchestrator.
type env struct {
	orch     *orchtest.Env
	sessions *websession.Sessions
	url      string
	// streamEnded receives the path of every event stream whose
	// handler returned.
	streamEnded chan string
}

func newEnv(t *testing.T, writeTimeout time.Duration, conn func(net.Conn)) *env {
	t.Helper()
	orch := orchtest.New(t, agentBin, orchestrator.Config{ReadyTimeout: deadline, Logger: orchtest.Logger(t)})
	// The first user is a global admin: keep it out of the tests' way.
	if _, _, err := orch.Svc.EnsureUser(context.Background(), store.NewUser{Username: "root"}); err != nil {
		t.Fatal(err)
	}
	sessions, err := websession.New(websession.Options{Store: orch.Store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	if conn != nil {
		srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { conn(c); return ctx }
	}
	t.Cleanup(srv.Close)
	e := &env{orch: orch, sessions: sessions, url: "http://" + srv.Listener.Addr().String(), streamEnded: make(chan string, 16)}
	cons, err := console.New(console.Options{Service: orch.Svc, Sessions: sessions, SignOutPurpose: "account",
		PublicURL: e.url, StreamWriteTimeout: writeTimeout, Logger: orchtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Shutdown)
	h := cons.Handler()
	watched := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			defer func() { e.streamEnded <- r.URL.Path }()
		}
		h.ServeHTTP(w, r)
	})
	srv.Config.Handler = api.NewServer(orch.Svc, api.Options{Auth: auth.MiddlewareOptions{Authenticators: []auth.Authenticator{orch.Svc}},
		Hosts: hostguard.Options{PublicURL: e.url}, Console: watched})
	srv.Start()
	return e
}

// browser is a signed-in user's cookie.
type browser struct {
	e      *env
	cookie *http.Cookie
	userID string
}

func (e *env) signIn(t *testing.T, username string) *browser {
	t.Helper()
	u, _, err := e.orch.Svc.EnsureUser(context.Background(), store.NewUser{Username: username})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	if _, err := e.sessions.Start(context.Background(), rec, u.ID, u.Username); err != nil {
		t.Fatal(err)
	}
	return &browser{e: e, cookie: rec.Result().Cookies()[0], userID: u.ID}
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request as the browser (b nil: signed out) and returns the
// answer with its body read.
func (b *browser) do(t *testing.T, method, url string, form url.Values, header http.Header) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, url, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if b != nil {
		req.AddCookie(b.cookie)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

var formToken = regexp.MustCompile(`<form method="post" action="([^"]+)"[^>]*>\s*<input type="hidden" name="csrf" value="([^"]*)">`)

// tokens are the CSRF tokens of a page's forms, by the path they post to.
func tokens(page string) map[string]string {
	out := map[string]string{}
	for _, m := range formToken.FindAllStringSubmatch(page, -1) {
		out[html.UnescapeString(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// startServer starts a server from the sandboxes page's form and waits
// until it runs.
func (b *browser) startServer(t *testing.T) string {
	t.Helper()
	_, page := b.do(t, "GET", b.e.url+"/servers", nil, nil)
	form := url.Values{"csrf": {tokens(page)["/servers"]}, "image_tag": {"base"}, "client_name": {"tests"}}
	resp, body := b.do(t, "POST", b.e.url+"/servers", form, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/servers/") {
		t.Fatalf("start: %d %q %.300s", resp.StatusCode, loc, body)
	}
	id := strings.TrimPrefix(loc, "/servers/")
	p, err := b.e.orch.Svc.BrowserPrincipal(context.Background(), b.userID)
	if err != nil {
		t.Fatal(err)
	}
	ticks, stop, err := b.e.orch.Svc.WatchServer(context.Background(), p, id)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for end := time.Now().Add(deadline); ; {
		srv, err := b.e.orch.Svc.GetServer(context.Background(), p, id)
		if err != nil {
			t.Fatal(err)
		}
		if srv.Status == orchestrator.ServerRunning {
			return id
		}
		if srv.Status != orchestrator.ServerStarting || time.Now().After(end) {
			t.Fatalf("server %s is %s (%s), want RUNNING", id, srv.Status, srv.Error)
		}
		select {
		case <-ticks:
		case <-time.After(time.Until(end)):
		}
	}
}

func (e *env) status(t *testing.T, id string) string {
	t.Helper()
	srv, err := e.orch.Store.ServerByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return srv.Status
}

// TestForms: every posted form needs the session's CSRF token for the
// path it posts to and must come from this site; another user's server
// is a 404 page for every page, stream and form, even with a CSRF token
// the user made himself (the session cookie is his own key); sandbox
// output is escaped; pages carry their safety headers.
func TestForms(t *testing.T) {
	e := newEnv(t, 0, nil)
	alice, bob := e.signIn(t, "alice"), e.signIn(t, "bob")

	resp, _ := (*browser)(nil).do(t, "GET", e.url+"/servers", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/oauth/login/start?return_to=%2Fservers" {
		t.Fatalf("signed out: %d %q, want a redirect to sign in and back", resp.StatusCode, resp.Header.Get("Location"))
	}

	id := alice.startServer(t)
	page := "/servers/" + id
	resp, body := alice.do(t, "GET", e.url+page, nil, nil)
	h := resp.Header
	if resp.StatusCode != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") ||
		strings.Contains(h.Get("Content-Security-Policy"), "unsafe-inline") || h.Get("X-Frame-Options") != "DENY" ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("server page: %d %v", resp.StatusCode, h)
	}
	tok := tokens(body)
	stop := page + "/stop"
	if tok[stop] == "" || tok[page+"/finish"] == "" || tok[page+"/bash"] == "" {
		t.Fatalf("the page lacks its forms' tokens: %v", tok)
	}

	refused := func(who *browser, form url.Values, header http.Header, why string) {
		t.Helper()
		resp, body := who.do(t, "POST", e.url+stop, form, header)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Form refused") {
			t.Errorf("%s: %d %.200s, want a 403 page", why, resp.StatusCode, body)
		}
		if st := e.status(t, id); st != orchestrator.ServerRunning {
			t.Fatalf("%s: the server is %s", why, st)
		}
	}
	refused(alice, url.Values{}, nil, "no token")
	refused(alice, url.Values{"csrf": {tok[page+"/finish"]}}, nil, "the finish form's token")
	refused(bob, url.Values{"csrf": {tok[stop]}}, nil, "alice's token with bob's session")
	refused(alice, url.Values{"csrf": {tok[stop]}}, http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}, "posted from another site")

	// Bob: a 404 for the page, its stream and its forms, whatever token.
	for _, path := range []string{page, page + "/events", page + "?file=x"} {
		resp, body := bob.do(t, "GET", e.url+path, nil, nil)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "tests") {
			t.Errorf("bob GET %s: %d %.200s, want 404", path, resp.StatusCode, body)
		}
	}
	own := websession.NewCSRF(bob.cookie.Value, "console", time.Now().Add(time.Hour), stop)
	resp, body = bob.do(t, "POST", e.url+stop, url.Values{"csrf": {own}}, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("bob stopping alice's server: %d %.200s, want a 404 page", resp.StatusCode, body)
	}
	if st := e.status(t, id); st != orchestrator.ServerRunning {
		t.Fatalf("bob stopped alice's server: %s", st)
	}

	// Sandbox output is text.
	resp, body = alice.do(t, "POST", e.url+page+"/bash", url.Values{"csrf": {tok[page+"/bash"]},
		"command": {`echo '<script>alert(1)</script>'; printf 'x%.0s' $(seq 100000)`}}, http.Header{"Berth-Fragment": {"command"}})
	if resp.StatusCode != 200 || strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("command output: %d %.500s", resp.StatusCode, body)
	}
	if len(body) > 80<<10 || !strings.Contains(body, "bytes of output not shown") {
		t.Errorf("100 kB of output shown as %d bytes, or without saying what was left out", len(body))
	}

	resp, body = alice.do(t, "POST", e.url+stop, url.Values{"csrf": {tok[stop]}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page+"?done=stop" {
		t.Fatalf("stop: %d %q %.200s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if st := e.status(t, id); st != orchestrator.ServerStopped {
		t.Fatalf("after the stop form the server is %s", st)
	}

	// Unknown paths: the console's 404 page; the API's stay JSON.
	if resp, body := alice.do(t, "GET", e.url+"/no/such/page", nil, nil); resp.StatusCode != 404 || !strings.Contains(body, "<h1>Not found</h1>") {
		t.Errorf("unknown page: %d %.200s", resp.StatusCode, body)
	}
	if resp, body := alice.do(t, "GET", e.url+"/api/no-such-route", nil, nil); resp.StatusCode != 404 || !strings.HasPrefix(body, `{"error":`) {
		t.Errorf("unknown API route: %d %.200s", resp.StatusCode, body)
	}
}

// TestEventStreamDropsStalledReader: a live page's stream whose browser
// stops reading is ended once a write has waited the write timeout, so a
// stalled client costs berth neither memory nor a goroutine for long,
// however many changes follow.
func TestEventStreamDropsStalledReader(t *testing.T) {
	// Small socket buffers on berth's side, so the stall shows at once.
	e := newEnv(t, 300*time.Millisecond, func(c net.Conn) {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetWriteBuffer(4096)
		}
	})
	alice := e.signIn(t, "alice")
	id := alice.startServer(t)

	d := net.Dialer{Control: nil}
	conn, err := d.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /servers/%s/events HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\n\r\n", id, strings.TrimPrefix(e.url, "http://"), alice.cookie.Name, alice.cookie.Value)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("stream: %q %v", status, err)
	}
	// From here on nothing is read. Each command is an operation of the
	// server, so a tick and a render of its recent operations (with their
	// results) that the stalled socket cannot take.
	p, err := e.orch.Svc.BrowserPrincipal(context.Background(), alice.userID)
	if err != nil {
		t.Fatal(err)
	}
	end := time.After(deadline)
	for i := 0; ; i++ {
		select {
		case path := <-e.streamEnded:
			if path != "/servers/"+id+"/events" {
				t.Fatalf("stream %s ended", path)
			}
			t.Logf("the stalled stream was dropped after %d commands", i)
			return
		case <-end:
			t.Fatalf("the stalled stream was not dropped after %d commands", i)
		default:
		}
		if _, err := e.orch.Svc.RunBashCommand(context.Background(), p, orchestrator.RunBashRequest{ServerID: id,
			Command: `head -c 20000 /dev/zero | tr '\0' x`, WaitSeconds: deadline.Seconds()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServerPageShowsUnhealthyAgent: a sandbox whose agent answers
// nothing (root in it holds every request, as a stand-in does here) fails
// its health checks and is shown unhealthy, with what the check found, on
// its page and in the sandboxes list; its page does not wait on the agent
// to browse the workspace.
func TestServerPageShowsUnhealthyAgent(t *testing.T) {
	e := newEnv(t, 0, nil)
	b := e.signIn(t, "alice")
	id := b.startServer(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	e.orch.StandIn(t, id, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	for end := time.Now().Add(deadline); ; {
		srv, err := e.orch.Store.ServerByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if srv.UnhealthySince != nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("server %s not marked unhealthy within %s", id, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, page := b.do(t, "GET", e.url+"/servers/"+id, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="server-health"`) ||
		!strings.Contains(page, "did not answer a health check") || !strings.Contains(page, "cannot be browsed while") {
		t.Fatalf("page of the unhealthy server: %d %s", resp.StatusCode, page)
	}
	if _, list := b.do(t, "GET", e.url+"/servers", nil, nil); !strings.Contains(list, ">unhealthy<") {
		t.Fatalf("sandboxes list does not show the server unhealthy: %s", list)
	}
}

// TestServerPageShowsProgress: a running operation that records its
// progress (a start pulling its image) shows it on its server's page.
func TestServerPageShowsProgress(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, nil)
	b := e.signIn(t, "alice")
	id := b.startServer(t)
	p, err := e.orch.Svc.BrowserPrincipal(ctx, b.userID)
	if err != nil {
		t.Fatal(err)
	}
	op, err := e.orch.Svc.RunBashCommand(ctx, p, orchestrator.RunBashRequest{ServerID: id, Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(deadline); op.Status != orchestrator.OpInProgress; {
		if op, err = e.orch.Svc.GetOperation(ctx, p, op.ID, 1); err != nil || time.Now().After(end) {
			t.Fatalf("the command's operation is %s (%v), want IN_PROGRESS", op.Status, err)
		}
	}
	if err := e.orch.Store.SetOperationProgress(ctx, op.ID, []byte(`{"step":"pulling example.com/app:1","bytes_done":1048576,"bytes_total":4194304,"layers_total":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, page := b.do(t, "GET", e.url+"/servers/"+id, nil, nil); !strings.Contains(page, "pulling example.com/app:1: 1Mi of 4Mi, 0 of 2 layers") {
		t.Fatalf("the server's page does not show the operation's progress: %s", page)
	}
}
