package edit

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

func newEditor(t *testing.T) (*Editor, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &Editor{Root: root}, dir
}

func wantCode(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	d := wire.DetailOf(err)
	if d.Code != code {
		t.Fatalf("code = %s (%s), want %s", d.Code, d.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(d.Message, p) {
			t.Errorf("message %q lacks %q", d.Message, p)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTempFiles fails if a temporary file was left in dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".berth-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCreateFile(t *testing.T) {
	e, dir := newEditor(t)
	ctx := context.Background()

	res, err := e.CreateFile(ctx, wire.CreateFileRequest{Path: "sub/dir/new.txt", Content: "a\nb\n"})
	if err != nil {
		t.Fatal(err)
	}
	if res != (wire.FileResult{Path: "sub/dir/new.txt", Bytes: 4, Lines: 2}) {
		t.Errorf("result = %+v", res)
	}
	p := filepath.Join(dir, "sub", "dir", "new.txt")
	if got := readFile(t, p); got != "a\nb\n" {
		t.Errorf("content = %q", got)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode().Perm())
	}

	_, err = e.CreateFile(ctx, wire.CreateFileRequest{Path: "sub/dir/new.txt", Content: "other"})
	wantCode(t, err, wire.CodeConflict, "sub/dir/new.txt", "overwrite: true")
	if got := readFile(t, p); got != "a\nb\n" {
		t.Errorf("refused create changed the file to %q", got)
	}

	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateFile(ctx, wire.CreateFileRequest{Path: "sub/dir/new.txt", Content: "other", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, p); got != "other" {
		t.Errorf("overwritten content = %q", got)
	}
	fi, _ = os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("overwrite changed mode to %v", fi.Mode().Perm())
	}

	_, err = e.CreateFile(ctx, wire.CreateFileRequest{Path: "sub", Content: "x", Overwrite: true})
	wantCode(t, err, wire.CodeBadRequest, "directory")
	_, err = e.CreateFile(ctx, wire.CreateFileRequest{Path: "sub/dir/new.txt/child", Content: "x"})
	wantCode(t, err, wire.CodeBadRequest, "not a directory")
	noTempFiles(t, dir)
}

func TestCreateFileEmptyAndLimit(t *testing.T) {
	e, dir := newEditor(t)
	e.MaxFileBytes = 10
	if _, err := e.CreateFile(context.Background(), wire.CreateFileRequest{Path: "empty", Content: ""}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "empty")); got != "" {
		t.Errorf("content = %q", got)
	}
	_, err := e.CreateFile(context.Background(), wire.CreateFileRequest{Path: "big", Content: strings.Repeat("x", 11)})
	wantCode(t, err, wire.CodeTooLarge, "10 byte limit")
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Errorf("too large file was written: %v", err)
	}
}

func TestPaths(t *testing.T) {
	e, dir := newEditor(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"/etc/passwd", secret, "../x", "a/../../x", "out/secret", "out/new", "link"} {
		t.Run(p, func(t *testing.T) {
			_, err := e.CreateFile(ctx, wire.CreateFileRequest{Path: p, Content: "x", Overwrite: true})
			wantCode(t, err, wire.CodeForbidden, p)
			_, err = e.EditFile(ctx, wire.EditFileRequest{Path: p, StartLine: 1, EndLine: 1, NewContent: "x"})
			wantCode(t, err, wire.CodeForbidden, p)
			_, err = e.PatchFile(ctx, wire.PatchFileRequest{Path: p, Patch: "@@ -1 +1 @@\n-keep\n+x\n"})
			wantCode(t, err, wire.CodeForbidden, p)
		})
	}
	if got := readFile(t, secret); got != "keep\n" {
		t.Fatalf("file outside the workspace changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !os.IsNotExist(err) {
		t.Fatalf("file created outside the workspace")
	}

	_, err := e.CreateFile(ctx, wire.CreateFileRequest{Path: "", Content: "x"})
	wantCode(t, err, wire.CodeBadRequest, "path")
	_, err = e.EditFile(ctx, wire.EditFileRequest{StartLine: 1, EndLine: 0})
	wantCode(t, err, wire.CodeBadRequest, "path")
	_, err = e.PatchFile(ctx, wire.PatchFileRequest{Patch: "@@ -1 +1 @@\n-a\n+b\n"})
	wantCode(t, err, wire.CodeBadRequest, "path")
	_, err = e.EditFile(ctx, wire.EditFileRequest{Path: "missing.txt", StartLine: 1, EndLine: 0})
	wantCode(t, err, wire.CodeNotFound, "missing.txt")
	_, err = e.PatchFile(ctx, wire.PatchFileRequest{Path: "missing.txt", Patch: "@@ -1 +1 @@\n-a\n+b\n"})
	wantCode(t, err, wire.CodeNotFound, "missing.txt")
}

// Editing through a symlink inside the workspace changes the file it
// points at and keeps the link.
func TestEditThroughSymlink(t *testing.T) {
	e, dir := newEditor(t)
	if err := os.MkdirAll(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real", "f"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real/f", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EditFile(context.Background(), wire.EditFileRequest{Path: "alias", StartLine: 2, EndLine: 2, NewContent: "B"}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "real", "f")); got != "a\nB\n" {
		t.Errorf("target = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "alias")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("alias is no longer a symlink: %v", err)
	}
}

func TestEditFile(t *testing.T) {
	e, dir := newEditor(t)
	p := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(p, []byte("one\r\ntwo\r\nthree"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := e.EditFile(ctx, wire.EditFileRequest{Path: "f.txt", StartLine: 2, EndLine: 2, NewContent: "2a\n2b\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "one\r\n2a\r\n2b\r\nthree"
	if got := readFile(t, p); got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	if res.Lines != 4 || res.Bytes != int64(len(want)) || res.Path != "f.txt" {
		t.Errorf("result = %+v", res)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want 0755", fi.Mode().Perm())
	}

	before, _ := os.Stat(p)
	_, err = e.EditFile(ctx, wire.EditFileRequest{Path: "f.txt", StartLine: 9, EndLine: 9, NewContent: "x"})
	wantCode(t, err, wire.CodeBadRequest, "f.txt", "start_line 9", "file has 4 lines", "between 1 and 5")
	unchanged(t, p, want, before)

	_, err = e.EditFile(ctx, wire.EditFileRequest{Path: ".", StartLine: 1, EndLine: 0})
	wantCode(t, err, wire.CodeBadRequest)
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = e.EditFile(ctx, wire.EditFileRequest{Path: "d", StartLine: 1, EndLine: 0})
	wantCode(t, err, wire.CodeBadRequest, "directory")
	noTempFiles(t, dir)
}

func TestEditFileTooLarge(t *testing.T) {
	e, dir := newEditor(t)
	e.MaxFileBytes = 8
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := e.EditFile(context.Background(), wire.EditFileRequest{Path: "f", StartLine: 3, EndLine: 2, NewContent: "ccccccc"})
	wantCode(t, err, wire.CodeTooLarge)
	if got := readFile(t, p); got != "a\nb\n" {
		t.Errorf("content = %q", got)
	}
	if err := os.WriteFile(p, []byte("123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = e.EditFile(context.Background(), wire.EditFileRequest{Path: "f", StartLine: 1, EndLine: 1, NewContent: "x"})
	wantCode(t, err, wire.CodeTooLarge)
}

// unchanged checks that the file at p still holds want with the mtime of
// before: nothing was written.
func unchanged(t *testing.T, p, want string, before fs.FileInfo) {
	t.Helper()
	if got := readFile(t, p); got != want {
		t.Fatalf("content = %q, want it left as %q", got, want)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		t.Fatalf("file was rewritten: mtime %v -> %v", before.ModTime(), after.ModTime())
	}
}

func TestPatchFile(t *testing.T) {
	e, dir := newEditor(t)
	p := filepath.Join(dir, "src", "main.go")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := numbered(30)
	if err := os.WriteFile(p, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	// An old mtime makes a rewrite visible even on coarse clocks.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	ctx := context.Background()

	bad := "--- a/src/main.go\n+++ b/src/main.go\n@@ -2,3 +2,3 @@\n l2\n-l3\n+three\n l4\n@@ -20,3 +20,3 @@\n l20\n-nope\n+x\n l22\n"
	_, err := e.PatchFile(ctx, wire.PatchFileRequest{Path: "src/main.go", Patch: bad})
	wantCode(t, err, wire.CodeConflict, "src/main.go", "hunk 2 (@@ -20,3 +20,3 @@)", `line 21 expected "nope" found "l21"`)
	unchanged(t, p, orig, before)

	_, err = e.PatchFile(ctx, wire.PatchFileRequest{Path: "src/main.go", Patch: "@@ -1,2 +1,2\n l1\n"})
	wantCode(t, err, wire.CodeBadRequest, "patch line 1")
	unchanged(t, p, orig, before)

	_, err = e.PatchFile(ctx, wire.PatchFileRequest{Path: "src/main.go"})
	wantCode(t, err, wire.CodeBadRequest, "patch")

	good := "--- a/src/main.go\n+++ b/src/main.go\n@@ -4,3 +4,3 @@\n l2\n-l3\n+three\n l4\n@@ -20,3 +20,4 @@\n l20\n l21\n+l21b\n l22\n"
	res, hunks, err := e.PatchFileReport(ctx, wire.PatchFileRequest{Path: "src/main.go", Patch: good})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(orig, "l3\n", "three\n", 1), "l21\n", "l21\nl21b\n", 1)
	if got := readFile(t, p); got != want {
		t.Fatalf("content = %q, want %q", got, want)
	}
	if res.Lines != 31 || res.Bytes != int64(len(want)) {
		t.Errorf("result = %+v", res)
	}
	if len(hunks) != 2 || hunks[0].Offset != -2 || hunks[0].Line != 2 || hunks[1].Offset != 0 {
		t.Errorf("hunks = %+v", hunks)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
	noTempFiles(t, dir)
}

func TestPatchFileMultiFile(t *testing.T) {
	e, dir := newEditor(t)
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	patch := "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n"
	_, err := e.PatchFile(context.Background(), wire.PatchFileRequest{Path: "f", Patch: patch})
	wantCode(t, err, wire.CodeBadRequest, "one file")
	if got := readFile(t, p); got != "a\n" {
		t.Errorf("content = %q", got)
	}
}

func TestCanceledContext(t *testing.T) {
	e, dir := newEditor(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.CreateFile(ctx, wire.CreateFileRequest{Path: "f", Content: "x"}); err == nil {
		t.Fatal("create with a canceled context succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !os.IsNotExist(err) {
		t.Fatal("file written despite canceled context")
	}
}

// Concurrent writers of the same file each replace it whole: a reader
// never sees a mix of two versions.
func TestAtomicReplace(t *testing.T) {
	e, dir := newEditor(t)
	p := filepath.Join(dir, "f")
	a := bytes.Repeat([]byte("a"), 1<<16)
	b := bytes.Repeat([]byte("b"), 1<<16)
	done := make(chan error, 1)
	go func() {
		for i := range 50 {
			c := a
			if i%2 == 1 {
				c = b
			}
			if _, err := e.CreateFile(context.Background(), wire.CreateFileRequest{Path: "f", Content: string(c), Overwrite: true}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			noTempFiles(t, dir)
			return
		default:
		}
		got, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read a partial file of %d bytes", len(got))
		}
	}
}
