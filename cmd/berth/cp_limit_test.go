package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

// TestCpDownloadOverTheLimit: a download of a workspace path whose
// archive is larger than the server's --max-archive-bytes fails, with the
// reason, instead of leaving a cut archive that extracts as a smaller,
// whole-looking tree; a path within the limit still copies.
func TestCpDownloadOverTheLimit(t *testing.T) {
	isolateHome(t)
	e := orchtest.New(t, agentBin, orchestrator.Config{MaxArchiveBytes: 1<<20 + 100})
	url := runtimetest.Serve(t, e.Svc)
	e.Token(t, "root")
	tok, _ := e.Token(t, "alice")
	env := envMap("BERTH_URL", url, "BERTH_TOKEN", tok)
	st := berth(t, env, nil, "start", "base", "--name", "cp-limit")
	if st.err != nil {
		t.Fatalf("start: %v\n%s", st.err, st.stderr)
	}
	sid := strings.TrimSpace(st.stdout)
	// Many small files: the archive is cut between entries, where a tar
	// reader sees a shorter archive end cleanly.
	if r := berth(t, env, nil, "exec", sid, "--", `mkdir big small && for i in $(seq 300); do head -c 10240 /dev/zero > big/f$i; done && echo hi > small/f`); r.err != nil {
		t.Fatalf("make files: %v %s", r.err, r.stderr)
	}
	dst := filepath.Join(t.TempDir(), "down")
	r := berth(t, env, nil, "cp", sid+":big", dst)
	if r.err == nil || !strings.Contains(r.err.Error(), "1048676") {
		t.Fatalf("cp of an archive over the limit: %v, want an error naming the 1048676-byte limit", r.err)
	}
	t.Logf("cp over the limit: %v", r.err)
	if r := berth(t, env, nil, "cp", sid+":small", dst); r.err != nil {
		t.Errorf("cp within the limit: %v", r.err)
	}

	// A sandbox answering in small pieces: the last piece before the
	// limit is smaller than the response's buffer, and must still reach
	// the client before the stream is aborted.
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for i := range 300 {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprint("f", i), Mode: 0o644, Size: 10240, Typeflag: tar.TypeReg})
		tw.Write(make([]byte, 10240))
	}
	tw.Close()
	e.StandIn(t, sid, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		for b := archive.Bytes(); len(b) > 0 && r.Context().Err() == nil; {
			n := min(1000, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			http.NewResponseController(w).Flush()
		}
	}))
	r = berth(t, env, nil, "cp", sid+":big", filepath.Join(t.TempDir(), "pieces"))
	if r.err == nil || !strings.Contains(r.err.Error(), "1048676") {
		t.Fatalf("cp of an archive over the limit, sent in small pieces: %v, want an error naming the 1048676-byte limit", r.err)
	}
}
