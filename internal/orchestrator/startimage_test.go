package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// TestStartRefusesAnUnknownImage: on the local runtime an image_tag is
// host, base, a workspace template or an OCI image reference. A
// start_server with a name that is none of them is refused with a 400
// naming it and the images there are, before anything is made (no
// server, no sandbox); base and a template start as before. A session
// whose configured image is no image is refused the same way. Issue 18
// item 9; references that are well formed are pulled at the start
// (TestStartFromImage).
func TestStartRefusesAnUnknownImage(t *testing.T) {
	ctx := context.Background()
	e := newService(t, orchestrator.Config{})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "images")
	if err := os.WriteFile(filepath.Join(e.DataDir, "images", "img", "hello.txt"), []byte("from img\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tag := range []string{"No-Such-Image", "python:3.12:4", "../img"} {
		op, err := e.Svc.StartServer(ctx, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: tag, WaitSeconds: deadline.Seconds()})
		if err == nil {
			t.Errorf("start with image %q was accepted: operation %s", tag, op.Status)
			continue
		}
		if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, "image_tag") || !strings.Contains(d.Message, `"`+tag+`"`) ||
			!strings.Contains(d.Message, "base, img, plain") {
			t.Errorf("start with image %q: %v (%s), want a bad_request naming it and the images there are", tag, err, d.Code)
		}
	}
	if servers, err := e.Svc.ListServers(ctx, alice, ""); err != nil || len(servers) != 0 {
		t.Fatalf("after refused starts alice has servers %+v (%v)", servers, err)
	}
	if ids, err := e.Runtime.List(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("after refused starts the runtime holds sandboxes %v (%v)", ids, err)
	}

	for tag, want := range map[string]string{"base": "", "img": "from img\n"} {
		srv := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: tag}).ServerID
		if got := bash(t, e.Svc, alice, srv, "cat hello.txt 2>/dev/null; true", nil).Stdout; got != want {
			t.Errorf("a server of %s holds %q, want %q", tag, got, want)
		}
	}

	s := newService(t, orchestrator.Config{SessionImage: "Missing-Session-Image"})
	bob := principal(t, s.Svc, "bob")
	_, err := s.Svc.SessionBash(ctx, bob, orchestrator.SessionBashRequest{Session: "k", SessionExecRequest: wireExec("true")})
	if err == nil {
		t.Errorf("a session of a missing image was served")
	} else if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest || !strings.Contains(d.Message, `"Missing-Session-Image"`) {
		t.Errorf("a session of a missing image: %v, want a bad_request naming it", err)
	}
}
