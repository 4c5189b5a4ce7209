package orchestrator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestUpstreamsChecked: bad mcp_upstreams are refused at the call with a
// 400 naming the field, and nothing is scheduled.
func TestUpstreamsChecked(t *testing.T) {
	e := newService(t, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "upstreams")
	ok := orchestrator.MCPUpstream{Name: "tools", URL: "http://127.0.0.1:9000/mcp"}
	with := func(mod func(*orchestrator.MCPUpstream)) orchestrator.MCPUpstream {
		u := ok
		mod(&u)
		return u
	}
	many := make([]orchestrator.MCPUpstream, 17)
	for i := range many {
		many[i] = with(func(u *orchestrator.MCPUpstream) { u.Name = fmt.Sprintf("u%d", i) })
	}
	for _, tc := range []struct {
		name  string
		ups   []orchestrator.MCPUpstream
		words []string
	}{
		{"path in name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Name = "../../etc/x" })}, []string{"mcp_upstreams[0].name", "RFC 1123"}},
		{"upper case name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Name = "Tools" })}, []string{"mcp_upstreams[0].name"}},
		{"underscore in name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Name = "a_b" })}, []string{"mcp_upstreams[0].name"}},
		{"empty name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Name = "" })}, []string{"mcp_upstreams[0].name"}},
		{"long name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Name = strings.Repeat("a", 64) })}, []string{"mcp_upstreams[0].name"}},
		{"duplicate name", []orchestrator.MCPUpstream{ok, ok}, []string{"mcp_upstreams[1].name", "twice"}},
		{"file URL", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.URL = "file:///etc/passwd" })}, []string{"mcp_upstreams[0].url", `"file"`}},
		{"no URL", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.URL = "" })}, []string{"mcp_upstreams[0].url"}},
		{"no host", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.URL = "http:///mcp" })}, []string{"mcp_upstreams[0].url", "host"}},
		{"long URL", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.URL = "http://h/" + strings.Repeat("a", 3000) })}, []string{"mcp_upstreams[0].url", "2048"}},
		{"bad header name", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Headers = map[string]string{"X Y": "v"} })}, []string{"mcp_upstreams[0].headers"}},
		{"CRLF in header", []orchestrator.MCPUpstream{with(func(u *orchestrator.MCPUpstream) { u.Headers = map[string]string{"X-Key": "secret\r\nHost: evil"} })}, []string{"mcp_upstreams[0].headers", "X-Key"}},
		{"too many", many, []string{"mcp_upstreams", "at most 16", "17"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, err := e.Svc.StartServer(context.Background(), alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", MCPUpstreams: tc.ups})
			wantCode(t, err, wire.CodeBadRequest, tc.words...)
			if strings.Contains(wire.DetailOf(err).Message, "secret") {
				t.Errorf("the error shows a header value: %v", err)
			}
			if op.ID != "" {
				t.Errorf("a refused start was scheduled as %s", op.ID)
			}
		})
	}
	if srvs, err := e.Svc.ListServers(context.Background(), alice, c.ID); err != nil || len(srvs) != 0 {
		t.Fatalf("refused starts left servers %v (%v)", srvs, err)
	}
}

// TestUpstreamsKeptWithTheServer: a server records the names of its
// upstreams; RESET keeps those its sandbox was started with, RESTART
// takes the new request's, as with env.
func TestUpstreamsKeptWithTheServer(t *testing.T) {
	ctx := context.Background()
	e := newService(t, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "upstreams")
	req := orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "ups", MCPUpstreams: []orchestrator.MCPUpstream{
		{Name: "first", URL: "http://127.0.0.1:9000/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
	}}
	id := startServer(t, e.Svc, alice, req).ServerID
	// The record names them, and the agent's directory in the sandbox
	// holds exactly their declarations.
	wantUpstreams := func(when string, want ...string) {
		t.Helper()
		got, err := e.Svc.GetServer(ctx, alice, id)
		if err != nil || !slices.Equal(got.MCPUpstreams, want) {
			t.Fatalf("%s: the server says mcp_upstreams %v (%v), want %v", when, got.MCPUpstreams, err, want)
		}
		ls := bash(t, e.Svc, alice, id, "cd "+runtime.UpstreamsDir+" && ls", nil)
		var files []string
		for _, n := range want {
			files = append(files, n+".json")
		}
		if ls.Stdout != strings.Join(files, "\n")+"\n" {
			t.Fatalf("%s: the sandbox's %s holds %q (stderr %q), want %v", when, runtime.UpstreamsDir, ls.Stdout, ls.Stderr, files)
		}
	}
	assertNoClearText(t, e.Store, "s3cret", "servers.upstreams_sealed")
	wantUpstreams("after start", "first")
	got := bash(t, e.Svc, alice, id, "cat "+runtime.UpstreamsDir+"/first.json", nil)
	if want := `{"url":"http://127.0.0.1:9000/mcp","headers":{"Authorization":"Bearer s3cret"}}`; got.Stdout != want {
		t.Fatalf("first.json in the sandbox is %q (stderr %q), want %s", got.Stdout, got.Stderr, want)
	}

	finish := func() {
		t.Helper()
		if _, err := e.Svc.FinishServer(ctx, alice, orchestrator.ServerRef{ServerID: id}); err != nil {
			t.Fatal(err)
		}
	}
	finish()
	req.MCPUpstreams = []orchestrator.MCPUpstream{{Name: "second", URL: "http://127.0.0.1:9001/mcp"}}
	req.ReuseStrategy = "RESET"
	if got := startServer(t, e.Svc, alice, req); got.ServerID != id {
		t.Fatalf("RESET started %s, want %s", got.ServerID, id)
	}
	wantUpstreams("after RESET", "first")

	finish()
	req.ReuseStrategy = "RESTART"
	if got := startServer(t, e.Svc, alice, req); got.ServerID != id {
		t.Fatalf("RESTART started %s, want %s", got.ServerID, id)
	}
	wantUpstreams("after RESTART", "second")
}
