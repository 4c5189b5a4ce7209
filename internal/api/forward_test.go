package api_test

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/wire"
)

// tarOf returns a tar archive holding one file.
func tarOf(t testing.TB, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// untarOne returns the name and content of the one file in a tar archive.
func untarOne(t testing.TB, archive []byte) (string, []byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	h, err := tr.Next()
	if err != nil {
		t.Fatalf("read archive: %v", err)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		t.Fatalf("read %s from the archive: %v", h.Name, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("archive holds more than one entry (%v)", err)
	}
	return h.Name, data
}

// Forwarding reaches the agent with the agent's own token in place of the
// caller's, streams bodies both ways beyond the JSON body limit, keeps the
// query, passes the agent's answers through and refuses servers that are
// not running.
func TestForward(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "forward")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	base := "/api/forward/" + client.ID + "/" + srv + "/"

	// The agent answers 401 to any token but its own, so a 200 proves
	// berth replaced the caller's credential with the agent token.
	var caps wire.Capabilities
	e.call(t, e.alice, "GET", base+"api/capabilities", nil, http.StatusOK, &caps)
	if caps.Version == "" || caps.Workspace == "" {
		t.Fatalf("capabilities %+v: want the agent's version and workspace", caps)
	}
	if r := e.send(t, "GET", base+"api/capabilities", nil, sessionToken(e.alice)); r.status != http.StatusOK {
		t.Fatalf("forward with Berth-Session-Token: %d %s", r.status, r.body)
	}

	// JSON in, JSON out, query kept.
	var wrote wire.FileResult
	e.call(t, e.alice, "POST", base+"api/fs/write", wire.WriteFileRequest{Path: "notes/hello.txt", Content: "hi\n", MakeParents: true}, http.StatusOK, &wrote)
	var read wire.ReadResult
	e.call(t, e.alice, "GET", base+"api/fs/cat?path=notes/hello.txt", nil, http.StatusOK, &read)
	if read.Content != "hi\n" {
		t.Fatalf("cat through the forward: %+v", read)
	}

	// The agent's own errors come back as the agent sent them.
	r := e.send(t, "GET", base+"api/fs/cat?path=missing.txt", nil, bearer(e.alice))
	wantError(t, r, http.StatusNotFound, "missing.txt")

	// A 6 MiB archive, beyond the 4 MiB JSON body limit, streams in and
	// back out unchanged.
	data := make([]byte, 6<<20)
	rand.Read(data)
	var up wire.FileResult
	e.call(t, e.alice, "PUT", base+"api/fs/archive?path=up", tarOf(t, "big.bin", data), http.StatusOK, &up)
	r = e.call(t, e.alice, "GET", base+"api/fs/archive?path=up/big.bin", nil, http.StatusOK, nil)
	if ct := r.header.Get("Content-Type"); ct != "application/x-tar" {
		t.Errorf("archive Content-Type %q", ct)
	}
	if name, got := untarOne(t, r.body); name != "big.bin" || !bytes.Equal(got, data) {
		t.Fatalf("archive round trip: got %s with %d bytes, want big.bin with the %d bytes sent", name, len(got), len(data))
	}

	// An Upgrade request takes the proxy path: the agent, which has no
	// WebSocket endpoint there, answers it as a plain GET.
	for _, prefix := range []string{"/api/ws-forward/", "/api/forward/"} {
		r = e.send(t, "GET", prefix+client.ID+"/"+srv+"/api/capabilities", nil, bearer(e.alice), func(r *http.Request) {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
			r.Header.Set("Sec-WebSocket-Version", "13")
			r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		})
		var got wire.Capabilities
		if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got.Version != caps.Version {
			t.Fatalf("upgrade request at %s: %d %s, want the agent's capabilities", prefix, r.status, r.body)
		}
	}

	// Shutting the agent down behind the orchestrator's back is refused.
	wantError(t, e.send(t, "POST", base+"api/shutdown", nil, bearer(e.alice)), http.StatusForbidden, "shutdown")
	e.call(t, e.alice, "GET", base+"api/capabilities", nil, http.StatusOK, nil)

	// A server that is not running answers 503 with Retry-After.
	var finished orchestrator.Server
	e.call(t, e.alice, "POST", "/api/servers/"+srv+"/finish", nil, http.StatusOK, &finished)
	if finished.Status != orchestrator.ServerFinished {
		t.Fatalf("finished server is %s", finished.Status)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", base + "api/capabilities", nil},
		{"POST", "/api/servers/" + srv + "/bash", `{"command":"true"}`},
	} {
		r := e.send(t, c.method, c.path, c.body, bearer(e.alice))
		wantError(t, r, http.StatusServiceUnavailable, srv, orchestrator.ServerFinished)
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
}

// TestForwardSanitizesHostileAnswers has a sandbox that took over its
// agent answer with HTML, cookies for berth's origin and origin-wide
// policies: through the streamed forward and forward-request alike,
// nothing of that reaches the caller, and the page cannot run script
// with berth's origin.
func TestForwardSanitizesHostileAnswers(t *testing.T) {
	e := newTestServer(t)
	client := e.registerClient(t, e.alice, "hostile")
	srv := e.startServer(t, e.alice, client.ID).ServerID
	e.StandIn(t, srv, orchtest.WithHostileHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<script>fetch('/api/whoami')</script>")
	})))

	r := e.call(t, e.alice, "GET", "/api/forward/"+client.ID+"/"+srv+"/page", nil, http.StatusOK, nil)
	if bad := orchtest.Unsanitized(r.header); len(bad) > 0 {
		t.Errorf("/api/forward relayed %q", bad)
	}
	var fr orchestrator.ForwardedResponse
	e.call(t, e.alice, "POST", "/api/forward-request", orchestrator.ForwardRequest{ServerID: srv, Path: "page"}, http.StatusOK, &fr)
	if bad := orchtest.Unsanitized(orchtest.Header(fr.Headers)); len(bad) > 0 {
		t.Errorf("/api/forward-request returned %q", bad)
	}
}
