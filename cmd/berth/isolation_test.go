package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-mcp/berth/internal/store/storetest"
)

// TestServeNeverConfinesLessThanAsked runs `berth serve` as an
// unprivileged user, who cannot confine sandboxes: with the default full
// isolation it refuses to start and says why and what to do; asked for
// none explicitly, it starts and says on stderr and in /readyz that
// sandboxes run unconfined. Item 16 of issue 8: berth once dropped to
// host root silently.
func TestServeNeverConfinesLessThanAsked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run berth as another user")
	}
	berthBin := buildBerth(t)
	for p := filepath.Dir(berthBin); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	data := t.TempDir()
	os.Chmod(data, 0o777)
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + data, "BERTH_DATABASE_URL=" + storetest.URL(t)}

	refused := exec.Command(berthBin, "serve", "--data-dir", filepath.Join(data, "full"), "--listen", "127.0.0.1:0")
	refused.Env, refused.SysProcAttr = env, nobody
	out, err := refused.CombinedOutput()
	if err == nil {
		t.Fatalf("berth serve as uid 65534 with full isolation started:\n%s", out)
	}
	for _, want := range []string{"not root", "--isolation none"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, out)
		}
	}

	unconfined := startServeAs(t, berthBin, filepath.Join(data, "none"), env, nobody, "--isolation", "none")
	if !strings.Contains(unconfined.log.String(), "WARNING: sandboxes run unconfined") {
		t.Fatalf("berth serve --isolation none does not warn:\n%s", unconfined.log.String())
	}
	resp, err := http.Get(unconfined.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Confined  bool
		Isolation string
		Warning   string
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	if ready.Confined || !strings.HasPrefix(ready.Isolation, "none") || !strings.Contains(ready.Warning, "unconfined") {
		t.Fatalf("/readyz of an unconfined berth: %+v", ready)
	}
}
