//go:build unix

package pgembed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// fakeInstall creates root/<ver>/bin with the given programs as scripts
// that answer --version like the real ones.
func fakeInstall(t *testing.T, root, ver string, progs ...string) string {
	t.Helper()
	bin := filepath.Join(root, ver, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		script := "#!/bin/sh\necho '" + p + " (PostgreSQL) " + ver + ".1'\n"
		if err := os.WriteFile(filepath.Join(bin, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

func TestFindBinariesPrefersHighestComplete(t *testing.T) {
	root := t.TempDir()
	fakeInstall(t, root, "9.6", programs...)
	fakeInstall(t, root, "14", programs...)
	fakeInstall(t, root, "15", programs...)
	fakeInstall(t, root, "16", "pg_ctl", "postgres") // no initdb: skipped
	if err := os.Mkdir(filepath.Join(root, "common"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	b, err := findBinaries(ctx, "", root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin", "pg_ctl"); b.pgctl != want || b.major != 15 {
		t.Errorf("picked %s (major %d), want %s", b.pgctl, b.major, want)
	}

	// An existing data dir of version 14 needs the 14 binaries.
	if b, err = findBinaries(ctx, "", root, 14); err != nil || b.major != 14 {
		t.Errorf("want major 14: %+v %v", b, err)
	}
	_, err = findBinaries(ctx, "", root, 12)
	if err == nil || !strings.Contains(err.Error(), "postgresql-12") || wire.DetailOf(err).Code != wire.CodeUnavailable {
		t.Errorf("missing version 12: %v", err)
	}
}

func TestFindBinariesPathFirstThroughSymlink(t *testing.T) {
	root := t.TempDir()
	bin15 := fakeInstall(t, root, "15", programs...)
	fakeInstall(t, root, "16", programs...)
	links := t.TempDir()
	if err := os.Symlink(filepath.Join(bin15, "pg_ctl"), filepath.Join(links, "pg_ctl")); err != nil {
		t.Fatal(err)
	}
	path := "relative/dir" + string(os.PathListSeparator) + links
	b, err := findBinaries(testCtx(t), path, root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.pgctl != filepath.Join(bin15, "pg_ctl") || b.postgres != filepath.Join(bin15, "postgres") || b.major != 15 {
		t.Errorf("PATH entry not preferred: %+v", b)
	}
}

func TestFindBinariesNoneFound(t *testing.T) {
	root := t.TempDir()
	fakeInstall(t, root, "15", "postgres")
	_, err := findBinaries(testCtx(t), "", root, 0)
	if err == nil || !strings.Contains(err.Error(), root+"/*/bin") || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("error %v", err)
	}
}
