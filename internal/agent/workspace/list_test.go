package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func entryPaths(es []wire.FileEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func listFixture(t *testing.T) *fixture {
	f := newFixture(t, Options{})
	f.write(t, "b.txt", "bbb")
	f.write(t, "a/z.txt", "z")
	f.write(t, "a/m/deep.txt", "deep")
	f.write(t, "c/one", "1")
	f.symlink(t, "c", "link")
	f.symlink(t, f.outside, "out")
	os.Chmod(filepath.Join(f.root, "b.txt"), 0o600)
	return f
}

func TestList(t *testing.T) {
	f := listFixture(t)
	res, err := f.ws.List(context.Background(), "", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b.txt", "c", "link", "out"}; !slices.Equal(entryPaths(res.Entries), want) || res.Truncated {
		t.Fatalf("entries %v truncated %v, want %v", entryPaths(res.Entries), res.Truncated, want)
	}
	b := res.Entries[1]
	if b.Type != "file" || b.Size != 3 || b.Mode != "0600" || b.Name != "b.txt" || b.ModTime == "" {
		t.Errorf("b.txt entry %+v", b)
	}
	if res.Entries[0].Type != "dir" {
		t.Errorf("a entry %+v", res.Entries[0])
	}
	if l := res.Entries[3]; l.Type != "symlink" || l.Target != "c" {
		t.Errorf("link entry %+v", l)
	}
	if l := res.Entries[4]; l.Type != "symlink" || l.Target != f.outside {
		t.Errorf("out entry %+v", l)
	}
	// A symlinked directory inside the workspace can be listed directly.
	res, err = f.ws.List(context.Background(), "link", false, 0)
	if err != nil || !slices.Equal(entryPaths(res.Entries), []string{"link/one"}) {
		t.Errorf("List(link) = %v, %v", entryPaths(res.Entries), err)
	}
	// Listing a file gives that file.
	res, err = f.ws.List(context.Background(), "a/z.txt", false, 0)
	if err != nil || len(res.Entries) != 1 || res.Entries[0].Name != "z.txt" || res.Entries[0].Path != "a/z.txt" {
		t.Errorf("List(a/z.txt) = %+v, %v", res, err)
	}
	_, err = f.ws.List(context.Background(), "missing", false, 0)
	wantCode(t, err, wire.CodeNotFound)
}

func TestListRecursive(t *testing.T) {
	f := listFixture(t)
	res, err := f.ws.List(context.Background(), ".", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Depth-first, and neither link is followed.
	want := []string{"a", "a/m", "a/m/deep.txt", "a/z.txt", "b.txt", "c", "c/one", "link", "out"}
	if got := entryPaths(res.Entries); !slices.Equal(got, want) || res.Truncated {
		t.Fatalf("recursive entries %v truncated %v, want %v", got, res.Truncated, want)
	}
	res, err = f.ws.List(context.Background(), "a", true, 0)
	if err != nil || !slices.Equal(entryPaths(res.Entries), []string{"a/m", "a/m/deep.txt", "a/z.txt"}) {
		t.Fatalf("List(a) = %v, %v", entryPaths(res.Entries), err)
	}
	for _, max := range []int{1, 3, 8} {
		res, err := f.ws.List(context.Background(), ".", true, max)
		if err != nil || !slices.Equal(entryPaths(res.Entries), want[:max]) || !res.Truncated {
			t.Errorf("max %d: %v truncated %v, %v", max, entryPaths(res.Entries), res.Truncated, err)
		}
	}
	res, _ = f.ws.List(context.Background(), ".", true, len(want))
	if res.Truncated {
		t.Error("listing exactly maxEntries entries is marked truncated")
	}
}

func TestListCancelled(t *testing.T) {
	f := listFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.ws.List(ctx, ".", true, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
