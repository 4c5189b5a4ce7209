package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

// assertNoTemp fails when a temporary file is left in dir.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	for _, n := range listNames(t, dir) {
		if strings.Contains(n, tempMarker) {
			t.Fatalf("temporary file %s left in %s", n, dir)
		}
	}
}

func TestWrite(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	res, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "a.txt", Content: "one\ntwo"})
	if err != nil {
		t.Fatal(err)
	}
	if res != (wire.FileResult{Path: "a.txt", Bytes: 7, Lines: 2}) {
		t.Errorf("result = %+v", res)
	}
	fi, _ := os.Stat(filepath.Join(f.root, "a.txt"))
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("default mode %v", fi.Mode().Perm())
	}
	if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "/" + filepath.Join(f.root, "a.txt"), Content: "new", Mode: "0750"}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(f.root, "a.txt"))
	fi, _ = os.Stat(filepath.Join(f.root, "a.txt"))
	if string(got) != "new" || fi.Mode().Perm() != 0o750 {
		t.Errorf("after overwrite: %q %v", got, fi.Mode().Perm())
	}
	assertNoTemp(t, f.root)

	_, err = f.ws.Write(ctx, wire.WriteFileRequest{Path: "x/y/z.txt", Content: "z"})
	wantCode(t, err, wire.CodeNotFound)
	if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "x/y/z.txt", Content: "z", MakeParents: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "x/y/z.txt")); string(got) != "z" {
		t.Errorf("x/y/z.txt = %q", got)
	}
	assertNoTemp(t, filepath.Join(f.root, "x/y"))
}

func TestWriteErrors(t *testing.T) {
	f := newFixture(t, Options{MaxWriteBytes: 10})
	f.write(t, "dir/file", "old")
	ctx := context.Background()
	for _, mode := range []string{"abc", "0999", "01777", "-1", "8"} {
		_, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "m", Content: "x", Mode: mode})
		wantCode(t, err, wire.CodeBadRequest)
	}
	for _, p := range []string{"dir", ".", ""} {
		_, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: p, Content: "x"})
		wantCode(t, err, wire.CodeBadRequest)
	}
	_, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "dir/file/x", Content: "x", MakeParents: true})
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Write(ctx, wire.WriteFileRequest{Path: "big", Content: strings.Repeat("x", 11)})
	wantCode(t, err, wire.CodeTooLarge)
	if _, err := os.Stat(filepath.Join(f.root, "big")); !os.IsNotExist(err) {
		t.Errorf("oversize write created the file: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "dir/file")); string(got) != "old" {
		t.Errorf("dir/file = %q", got)
	}
}

// A symlink inside the workspace is written through and survives.
func TestWriteThroughInWorkspaceSymlink(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "real/target.txt", "old")
	f.symlink(t, "real/target.txt", "link")
	f.symlink(t, "../real", "real/self") // real/self -> real
	f.symlink(t, "real/self/target.txt", "chain")
	ctx := context.Background()
	for _, p := range []string{"link", "chain"} {
		if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: p, Content: "via " + p}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(f.root, "real/target.txt")); string(got) != "via "+p {
			t.Errorf("after writing %s target = %q", p, got)
		}
		if fi, err := os.Lstat(filepath.Join(f.root, p)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", p)
		}
	}
	assertNoTemp(t, filepath.Join(f.root, "real"))
}

// When the rename fails the old content stays and the temporary file goes.
func TestWriteFailureKeepsOldContent(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "d/a.txt", "old")
	var tmpSeen string
	f.ws.beforeRename = func(name string) error {
		// The new content is complete in the temporary file, and the
		// target still holds the old one.
		for _, n := range listNames(t, filepath.Join(f.root, "d")) {
			if strings.Contains(n, tempMarker) {
				tmpSeen = n
				if got, _ := os.ReadFile(filepath.Join(f.root, "d", n)); string(got) != "new" {
					t.Errorf("temporary file holds %q", got)
				}
			}
		}
		if got, _ := os.ReadFile(filepath.Join(f.root, "d/a.txt")); string(got) != "old" {
			t.Errorf("target changed before the rename: %q", got)
		}
		// Put a non-empty directory where the file was, so the real
		// rename fails.
		os.Remove(filepath.Join(f.root, "d/a.txt"))
		os.MkdirAll(filepath.Join(f.root, "d/a.txt/sub"), 0o755)
		return nil
	}
	_, err := f.ws.Write(context.Background(), wire.WriteFileRequest{Path: "d/a.txt", Content: "new"})
	if err == nil {
		t.Fatal("write over a directory swapped in before the rename succeeded")
	}
	if tmpSeen == "" {
		t.Fatal("no temporary file was seen before the rename")
	}
	assertNoTemp(t, filepath.Join(f.root, "d"))

	// A hook error is reported and also cleans up.
	os.RemoveAll(filepath.Join(f.root, "d/a.txt"))
	f.write(t, "d/a.txt", "old")
	boom := errors.New("boom")
	f.ws.beforeRename = func(string) error { return boom }
	if _, err := f.ws.Write(context.Background(), wire.WriteFileRequest{Path: "d/a.txt", Content: "new"}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "d/a.txt")); string(got) != "old" {
		t.Errorf("a.txt = %q after a failed write", got)
	}
	assertNoTemp(t, filepath.Join(f.root, "d"))
}

// Readers racing with writers see one whole version or the other.
func TestWriteIsAtomicForReaders(t *testing.T) {
	f := newFixture(t, Options{})
	const size = 256 << 10
	versions := []string{strings.Repeat("a", size), strings.Repeat("b", size/2)}
	f.write(t, "f", versions[0])
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range 100 {
			if _, err := f.ws.Write(ctx, wire.WriteFileRequest{Path: "f", Content: versions[i%2]}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		got, err := os.ReadFile(filepath.Join(f.root, "f"))
		if err != nil {
			t.Fatal(err)
		}
		reads++
		if !bytes.Equal(got, []byte(versions[0])) && !bytes.Equal(got, []byte(versions[1])) {
			t.Fatalf("reader saw a partial file of %d bytes", len(got))
		}
		select {
		case <-done:
			wg.Wait()
			t.Logf("%d reads during 100 writes", reads)
			assertNoTemp(t, f.root)
			return
		default:
		}
	}
}
