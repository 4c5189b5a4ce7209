package main

import (
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
	e := orchtest.New(t, agentBin, orchestrator.Config{MaxArchiveBytes: 1 << 20})
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
	if r.err == nil || !strings.Contains(r.err.Error(), "1048576") {
		t.Fatalf("cp of an archive over the limit: %v, want an error naming the 1048576-byte limit", r.err)
	}
	t.Logf("cp over the limit: %v", r.err)
	if r := berth(t, env, nil, "cp", sid+":small", dst); r.err != nil {
		t.Errorf("cp within the limit: %v", r.err)
	}
}
