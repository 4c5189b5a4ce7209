package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestMkdir(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "file", "x")
	ctx := context.Background()
	if res, err := f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "a"}); err != nil || res.Path != "a" {
		t.Fatalf("Mkdir(a) = %+v, %v", res, err)
	}
	_, err := f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "a"})
	wantCode(t, err, wire.CodeConflict)
	_, err = f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "b/c"})
	wantCode(t, err, wire.CodeNotFound)
	if _, err := f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "b/c/d", Parents: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(f.root, "b/c/d")); err != nil || !fi.IsDir() {
		t.Fatalf("b/c/d: %v", err)
	}
	if _, err := f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "b/c/d", Parents: true}); err != nil {
		t.Errorf("Mkdir -p of an existing directory: %v", err)
	}
	_, err = f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "file", Parents: true})
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "file/sub", Parents: true})
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Mkdir(ctx, wire.MkdirRequest{Path: "file"})
	wantCode(t, err, wire.CodeConflict)
}

func TestRemove(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "file", "x")
	f.write(t, "tree/a/b", "x")
	os.Mkdir(filepath.Join(f.root, "empty"), 0o755)
	f.symlink(t, "tree", "treelink")
	ctx := context.Background()
	for _, p := range []string{"", ".", "./", "tree/..", f.root} {
		_, err := f.ws.Remove(ctx, p, true)
		wantCode(t, err, wire.CodeForbidden)
	}
	_, err := f.ws.Remove(ctx, "missing", false)
	wantCode(t, err, wire.CodeNotFound)
	for _, p := range []string{"tree", "empty"} {
		_, err = f.ws.Remove(ctx, p, false)
		wantCode(t, err, wire.CodeBadRequest)
	}
	// A symlink to a directory is removed as a link, without recursive.
	if _, err := f.ws.Remove(ctx, "treelink", false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"file", "empty"} {
		if _, err := f.ws.Remove(ctx, p, p == "empty"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.ws.Remove(ctx, "tree", true); err != nil {
		t.Fatal(err)
	}
	if names := listNames(t, f.root); len(names) != 0 {
		t.Errorf("workspace still holds %v", names)
	}
}
