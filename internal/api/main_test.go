package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/wire"
)

// agentBin is the berth-agent binary, built once for every test.
var agentBin string

func TestMain(m *testing.M) { orchtest.Main(m, &agentBin) }

// deadline bounds every wait: generous, for a busy 2-core machine.
const deadline = 90 * time.Second

// waitSeconds is the wait_seconds the tests send: the whole deadline.
var waitSeconds = deadline.Seconds()

// testEnv is one berth: an orchestrator (orchtest's fresh database,
// local runtime and background work) and the REST API on a loopback port,
// with three users: admin (the first user, a global admin), alice and bob
// (members of the default namespace).
type testEnv struct {
	*orchtest.Env
	handler http.Handler
	url     string
	client  *http.Client

	admin, alice, bob string // session tokens
}

// newTestServer starts a berth for one test. Everything it starts is
// stopped when the test ends, every sandbox agent included.
func newTestServer(t testing.TB) *testEnv {
	t.Helper()
	return newTestServerOpts(t, 0)
}

// newTestServerOpts is newTestServer with a JSON body limit (0 = the
// default).
func newTestServerOpts(t testing.TB, maxBodyBytes int64) *testEnv {
	t.Helper()
	log := orchtest.Logger(t)
	o := orchtest.New(t, agentBin, orchestrator.Config{ReadyTimeout: deadline, Logger: log})
	// The listener exists first, so the handler knows its own URL.
	ts := httptest.NewUnstartedServer(nil)
	t.Cleanup(ts.Close)
	h := api.NewServer(o.Svc, api.Options{
		Auth:         auth.MiddlewareOptions{Authenticators: []auth.Authenticator{o.Svc}, Realm: "berth", Logger: log},
		Hosts:        hostguard.Options{PublicURL: "http://" + ts.Listener.Addr().String()},
		MaxBodyBytes: maxBodyBytes,
		Logger:       log,
	})
	ts.Config.Handler = h
	ts.Start()
	e := &testEnv{Env: o, handler: h, url: ts.URL, client: ts.Client()}
	e.admin, _ = e.Token(t, "admin")
	e.alice, _ = e.Token(t, "alice")
	e.bob, _ = e.Token(t, "bob")
	return e
}

// reply is an HTTP answer read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorDetail decodes the wire.Error body of the reply.
func (r reply) errorDetail(t testing.TB) wire.ErrorDetail {
	t.Helper()
	var e wire.Error
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("answer %d is not a JSON error: %q", r.status, r.body)
	}
	return e.Error
}

// bearer sets a session token as Authorization: Bearer.
func bearer(token string) func(*http.Request) {
	return func(r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
	}
}

// sessionToken sets a session token as Berth-Session-Token.
func sessionToken(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set(auth.SessionTokenHeader, token) }
}

// send makes one request. body is sent as is when it is a string or
// []byte, as JSON otherwise, and not at all when nil.
func (e *testEnv) send(t testing.TB, method, path string, body any, opts ...func(*http.Request)) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: raw}
}

// call makes a request as token, fails the test unless the answer has
// status want, and decodes the JSON answer into out (when not nil).
func (e *testEnv) call(t testing.TB, token, method, path string, body any, want int, out any) reply {
	t.Helper()
	r := e.send(t, method, path, body, bearer(token))
	if r.status != want {
		t.Fatalf("%s %s: got %d %s, want %d", method, path, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: answer %q: %v", method, path, r.body, err)
		}
	}
	return r
}

// wantError fails the test unless the reply has the status, the wire code
// that goes with it, and a message naming every one of words.
func wantError(t testing.TB, r reply, status int, words ...string) wire.ErrorDetail {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %d %s, want %d", r.status, r.body, status)
	}
	d := r.errorDetail(t)
	// 405 has no wire code: wire errors never mean a wrong method.
	if status != http.StatusMethodNotAllowed && wire.StatusOf(d.Code) != status {
		t.Errorf("error code %q does not go with status %d", d.Code, status)
	}
	for _, w := range words {
		if !strings.Contains(d.Message, w) {
			t.Errorf("message %q does not name %q", d.Message, w)
		}
	}
	return d
}

// registerClient registers a client as token over the REST API.
func (e *testEnv) registerClient(t testing.TB, token, name string) orchestrator.Client {
	t.Helper()
	var c orchestrator.Client
	e.call(t, token, "POST", "/api/clients", map[string]any{"name": name}, http.StatusOK, &c)
	if c.ID == "" || c.Status != orchestrator.ClientAlive {
		t.Fatalf("registered client %+v: want an id and status ALIVE", c)
	}
	return c
}

// startServer starts a server for the client over the REST API and waits
// for it to run.
func (e *testEnv) startServer(t testing.TB, token, clientID string) orchestrator.StartServerResult {
	t.Helper()
	var op orchestrator.Operation
	e.call(t, token, "POST", "/api/servers", map[string]any{
		"client_id": clientID, "image_tag": "plain", "wait_seconds": waitSeconds,
	}, http.StatusOK, &op)
	var res orchestrator.StartServerResult
	opResult(t, op, &res)
	if res.ServerID == "" || res.Server.Status != orchestrator.ServerRunning {
		t.Fatalf("start result %s: want a running server", op.Result)
	}
	return res
}

// opResult fails the test unless op succeeded, and decodes its result (a
// JSON document in a string) into out.
func opResult(t testing.TB, op orchestrator.Operation, out any) {
	t.Helper()
	if op.Status != orchestrator.OpSucceeded || op.Result == nil {
		t.Fatalf("operation %s (%s) is %s (error %q), want SUCCEEDED with a result", op.ID, op.Type, op.Status, op.Error)
	}
	if err := json.Unmarshal(op.Result, out); err != nil {
		t.Fatalf("operation %s result %s: %v", op.ID, op.Result, err)
	}
}

// bashResult decodes a finished run_bash_command operation: its result is
// the command's result as an object.
func bashResult(t testing.TB, op orchestrator.Operation) wire.BashResult {
	t.Helper()
	var res wire.BashResult
	opResult(t, op, &res)
	return res
}
