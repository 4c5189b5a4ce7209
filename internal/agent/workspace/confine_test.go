package workspace

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestRel(t *testing.T) {
	f := newFixture(t, Options{})
	cases := map[string]string{
		"":                                ".",
		".":                               ".",
		"a/b/../c":                        "a/c",
		"./x/":                            "x",
		f.root:                            ".",
		filepath.Join(f.root, "src/a.go"): "src/a.go",
	}
	for in, want := range cases {
		got, err := f.ws.Rel(in)
		if err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"../x", "a/../../x", "..", "/etc/passwd", f.root + "x/y"} {
		_, err := f.ws.Rel(in)
		wantCode(t, err, wire.CodeForbidden)
		if !strings.Contains(err.Error(), in) {
			t.Errorf("error %q does not name the path %q", err, in)
		}
	}
	_, err := f.ws.Rel("a\x00b")
	wantCode(t, err, wire.CodeBadRequest)
}

// A root given through a symlink accepts absolute paths in both spellings.
func TestRelThroughSymlinkedRoot(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(Options{Root: link})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, p := range []string{filepath.Join(link, "a"), filepath.Join(real, "a")} {
		if got, err := ws.Rel(p); err != nil || got != "a" {
			t.Errorf("Rel(%q) = %q, %v; want a", p, got, err)
		}
	}
}

func TestOpenRejectsBadRoot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, root := range []string{"", filepath.Join(t.TempDir(), "missing"), file} {
		if ws, err := Open(Options{Root: root}); err == nil {
			ws.Close()
			t.Errorf("Open(%q) succeeded", root)
		}
	}
	if _, err := Open(Options{Root: t.TempDir(), MaxWriteBytes: -1}); err == nil {
		t.Error("Open accepted a negative limit")
	}
}

// escapeFixture plants links that lead out of the workspace.
func escapeFixture(t *testing.T, opts Options) *fixture {
	f := newFixture(t, opts)
	f.symlink(t, "/etc", "evil")
	f.symlink(t, f.secret, "secretlink")
	f.symlink(t, "../outside/secret", "relsecret")
	f.symlink(t, f.outside, "outdir")
	return f
}

func TestEscapesAreForbidden(t *testing.T) {
	f := escapeFixture(t, Options{})
	ctx := context.Background()
	reads := []string{"../outside/secret", "a/../../outside/secret", "/etc/passwd", f.secret,
		"evil/passwd", "secretlink", "relsecret", "outdir/secret"}
	for _, p := range reads {
		res, err := f.ws.Read(ctx, p, 0, 0, false)
		wantCode(t, err, wire.CodeForbidden)
		if res.Content != "" {
			t.Errorf("Read(%q) returned content %q", p, res.Content)
		}
		if !strings.Contains(err.Error(), p) && !strings.Contains(err.Error(), filepath.Clean(p)) {
			t.Errorf("Read(%q) error %q does not name the path", p, err)
		}
		_, err = f.ws.Read(ctx, p, 0, 0, true)
		wantCode(t, err, wire.CodeForbidden)
		_, err = f.ws.List(ctx, p, false, 0)
		wantCode(t, err, wire.CodeForbidden)
		err = f.ws.WriteArchive(ctx, p, &bytes.Buffer{})
		wantCode(t, err, wire.CodeForbidden)
	}
	writes := []string{"../outside/new", "a/../../outside/new", filepath.Join(f.outside, "new"),
		"outdir/new", "secretlink", "relsecret", "outdir/sub/new"}
	for _, p := range writes {
		_, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: p, Content: "pwned", MakeParents: true})
		wantCode(t, err, wire.CodeForbidden)
		_, err = f.ws.Mkdir(ctx, wire.MkdirRequest{Path: p, Parents: true})
		wantCode(t, err, wire.CodeForbidden)
		_, err = f.ws.ExtractArchive(ctx, p, tarOf(t, tarEntry{name: "x", body: "pwned"}))
		wantCode(t, err, wire.CodeForbidden)
	}
	for _, p := range []string{"../outside/secret", "outdir/secret", f.secret} {
		_, err := f.ws.Remove(ctx, p, true)
		wantCode(t, err, wire.CodeForbidden)
	}
	f.assertOutsideIntact(t)
	if _, err := os.Lstat("/etc/passwd"); err != nil {
		t.Fatalf("/etc/passwd: %v", err)
	}
}

// Removing a link that points outside removes only the link.
func TestRemoveEscapingSymlinkRemovesLinkOnly(t *testing.T) {
	f := escapeFixture(t, Options{})
	for _, p := range []string{"outdir", "secretlink"} {
		if _, err := f.ws.Remove(context.Background(), p, true); err != nil {
			t.Fatalf("Remove(%s): %v", p, err)
		}
		if _, err := os.Lstat(filepath.Join(f.root, p)); !os.IsNotExist(err) {
			t.Fatalf("%s still exists: %v", p, err)
		}
	}
	f.assertOutsideIntact(t)
}

func TestAllowOutside(t *testing.T) {
	f := escapeFixture(t, Options{AllowOutside: true})
	ctx := context.Background()
	for _, p := range []string{"../outside/secret", "a/../../outside/secret", f.secret, "secretlink", "relsecret", "outdir/secret"} {
		res, err := f.ws.Read(ctx, p, 0, 0, false)
		if err != nil || res.Content != secretText {
			t.Errorf("Read(%q) = %q, %v", p, res.Content, err)
		}
	}
	if _, err := f.ws.Read(ctx, "evil/passwd", 0, 0, false); err != nil {
		t.Errorf("Read(evil/passwd): %v", err)
	}
	// Writing through a link lands on its target and keeps the link.
	if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "secretlink", Content: "changed"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.secret); string(got) != "changed" {
		t.Errorf("secret = %q after write through the link", got)
	}
	if fi, err := os.Lstat(filepath.Join(f.root, "secretlink")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("secretlink is no longer a symlink: %v", err)
	}
	if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "../outside/new/file", Content: "x", MakeParents: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.outside, "new/file")); string(got) != "x" {
		t.Errorf("outside/new/file = %q", got)
	}
	res, err := f.ws.List(ctx, f.outside, false, 0)
	if err != nil || len(res.Entries) != 2 || res.Path != f.outside {
		t.Errorf("List(outside) = %+v, %v", res, err)
	}
	if _, err := f.ws.Mkdir(ctx, wire.MkdirRequest{Path: filepath.Join(f.outside, "new/dir")}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(f.outside, "new/dir")); err != nil || !fi.IsDir() {
		t.Fatalf("outside/new/dir: %v", err)
	}
	if _, err := f.ws.Remove(ctx, "../outside/new", true); err != nil {
		t.Fatal(err)
	}
	// Even unconfined, the workspace root and its ancestors are kept.
	for _, p := range []string{".", "..", "/", f.root} {
		_, err := f.ws.Remove(ctx, p, true)
		wantCode(t, err, wire.CodeForbidden)
	}
}

// With AllowOutside an archive still cannot write through a link it
// planted: extraction is confined to the destination.
func TestAllowOutsideExtractStaysInDestination(t *testing.T) {
	f := newFixture(t, Options{AllowOutside: true})
	_, err := f.ws.ExtractArchive(context.Background(), "dst", tarOf(t,
		tarEntry{name: "l", link: f.outside, typ: '2'},
		tarEntry{name: "l/evil", body: "pwned"}))
	wantCode(t, err, wire.CodeForbidden)
	f.assertOutsideIntact(t)
}
