package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// fixture is a workspace next to an "outside" directory holding a secret
// file, so tests can check that nothing outside was read or changed.
type fixture struct {
	ws      *Workspace
	root    string
	outside string
	secret  string
}

const secretText = "top secret\n"

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte(secretText), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Root = root
	ws, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &fixture{ws: ws, root: ws.Root(), outside: outside, secret: secret}
}

// assertOutsideIntact fails when the outside directory holds anything but
// the untouched secret.
func (f *fixture) assertOutsideIntact(t *testing.T) {
	t.Helper()
	got, err := os.ReadFile(f.secret)
	if err != nil || string(got) != secretText {
		t.Fatalf("secret outside the workspace changed: %q, %v", got, err)
	}
	names := listNames(t, f.outside)
	if !slices.Equal(names, []string{"secret"}) {
		t.Fatalf("outside directory holds %v, want only secret", names)
	}
}

func (f *fixture) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) symlink(t *testing.T, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(f.root, rel)); err != nil {
		t.Fatal(err)
	}
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got none", code)
	}
	var d *wire.ErrorDetail
	if !errors.As(err, &d) {
		t.Fatalf("want a %s error, got uncoded %v", code, err)
	}
	if d.Code != code {
		t.Fatalf("want a %s error, got %s: %v", code, d.Code, err)
	}
}
