package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

type tarEntry struct {
	name string
	body string
	link string
	typ  byte // tar type flag; 0 means a regular file
	mode int64
	size int64 // header size when it should differ from len(body)
}

// tarOf builds an archive in memory; hostile archives are small.
func tarOf(t *testing.T, entries ...tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, ModTime: time.Now()}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if e.size != 0 {
			h.Size = e.size
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A deliberately short body leaves the writer unable to close
	// cleanly; the archive is still what the test wants.
	tw.Close()
	return &buf
}

func TestArchiveRoundTrip(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	src := filepath.Join(f.root, "src")
	files := map[string]struct {
		body string
		mode os.FileMode
	}{
		"top.txt":         {"top\n", 0o644},
		"bin/run.sh":      {"#!/bin/sh\necho hi\n", 0o755},
		"a/b/c/deep.txt":  {"deep", 0o600},
		"a/b/private.key": {"k", 0o640},
		"a/empty":         {"", 0o644},
	}
	for name, fl := range files {
		f.write(t, "src/"+name, fl.body)
		os.Chmod(filepath.Join(src, name), fl.mode)
	}
	os.Mkdir(filepath.Join(src, "emptydir"), 0o750)
	os.Chmod(filepath.Join(src, "emptydir"), 0o750)
	f.symlink(t, "a/b/c/deep.txt", "src/deeplink")
	f.symlink(t, "../top.txt", "src/a/uplink")
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "top.txt"), mtime, mtime)

	var buf bytes.Buffer
	if err := f.ws.WriteArchive(ctx, "src", &buf); err != nil {
		t.Fatal(err)
	}
	res, err := f.ws.ExtractArchive(ctx, "copy/nested", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "copy/nested" || res.Bytes != int64(len("top\n#!/bin/sh\necho hi\ndeepk")) {
		t.Errorf("result = %+v", res)
	}
	dst := filepath.Join(f.root, "copy/nested")
	for name, fl := range files {
		p := filepath.Join(dst, name)
		got, err := os.ReadFile(p)
		if err != nil || string(got) != fl.body {
			t.Errorf("%s = %q, %v; want %q", name, got, err, fl.body)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != fl.mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), fl.mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "emptydir")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("emptydir: %v, %v", fi, err)
	}
	for link, want := range map[string]string{"deeplink": "a/b/c/deep.txt", "a/uplink": "../top.txt"} {
		if got, err := os.Readlink(filepath.Join(dst, link)); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %q", link, got, err, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dst, "top.txt")); !fi.ModTime().Equal(mtime) {
		t.Errorf("top.txt mtime %v, want %v", fi.ModTime(), mtime)
	}
}

func TestArchiveSingleFileAndGzip(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	f.write(t, "dir/one.txt", "one")
	var buf bytes.Buffer
	if err := f.ws.WriteArchive(ctx, "dir/one.txt", &buf); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.Copy(zw, &buf)
	zw.Close()
	if _, err := f.ws.ExtractArchive(ctx, "out", &gz); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "out/one.txt")); string(got) != "one" {
		t.Errorf("out/one.txt = %q", got)
	}
}

func TestArchiveInWorkspaceLinks(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "shared/x", "x")
	_, err := f.ws.ExtractArchive(context.Background(), "dst", tarOf(t,
		tarEntry{name: "f", body: "data"},
		tarEntry{name: "hard", link: "f", typ: tar.TypeLink},
		tarEntry{name: "up", link: "../shared/x", typ: tar.TypeSymlink},
		tarEntry{name: "d", link: "sub", typ: tar.TypeSymlink},
		tarEntry{name: "sub/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "d/through", body: "via link"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "dst/hard")); string(got) != "data" {
		t.Errorf("hard = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "dst/up")); string(got) != "x" {
		t.Errorf("up = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(f.root, "dst/sub/through")); string(got) != "via link" {
		t.Errorf("sub/through = %q", got)
	}
}

func TestHostileArchives(t *testing.T) {
	cases := []struct {
		name    string
		code    string
		entries []tarEntry
	}{
		{"dotdot", wire.CodeForbidden, []tarEntry{{name: "../../evil", body: "x"}}},
		{"inner dotdot", wire.CodeForbidden, []tarEntry{{name: "a/../../../evil", body: "x"}}},
		{"absolute", wire.CodeForbidden, []tarEntry{{name: "/tmp/evil", body: "x"}}},
		{"symlink to etc then through it", wire.CodeForbidden, []tarEntry{
			{name: "l", link: "/etc", typ: tar.TypeSymlink},
			{name: "l/evil", body: "x"}}},
		{"relative symlink out", wire.CodeForbidden, []tarEntry{
			{name: "l", link: "../../../outside", typ: tar.TypeSymlink},
			{name: "l/evil", body: "x"}}},
		{"symlink out via a linked parent", wire.CodeForbidden, []tarEntry{
			{name: "sub/", typ: tar.TypeDir},
			{name: "sub/up", link: "..", typ: tar.TypeSymlink},
			{name: "sub/up/l", link: "../../outside", typ: tar.TypeSymlink}}},
		{"hardlink out", wire.CodeForbidden, []tarEntry{{name: "h", link: "../../outside/secret", typ: tar.TypeLink}}},
		{"hardlink absolute", wire.CodeForbidden, []tarEntry{{name: "h", link: "/etc/passwd", typ: tar.TypeLink}}},
		{"fifo", wire.CodeBadRequest, []tarEntry{{name: "p", typ: tar.TypeFifo}}},
		{"char device", wire.CodeBadRequest, []tarEntry{{name: "null", typ: tar.TypeChar}}},
		{"oversize", wire.CodeTooLarge, []tarEntry{{name: "small", body: "ok"}, {name: "big", body: strings.Repeat("x", 2000)}}},
		{"truncated", wire.CodeBadRequest, []tarEntry{{name: "short", body: "abc", size: 100}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{MaxArchiveBytes: 1000})
			_, err := f.ws.ExtractArchive(context.Background(), "dst", tarOf(t, c.entries...))
			wantCode(t, err, c.code)
			t.Log(err)
			f.assertOutsideIntact(t)
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Fatal("/tmp/evil exists")
			}
			if _, err := os.Lstat("/etc/evil"); err == nil {
				t.Fatal("/etc/evil exists")
			}
			if _, err := os.Lstat(filepath.Join(f.root, "dst/big")); err == nil {
				t.Fatal("oversize entry was written")
			}
		})
	}
}

// A link planted in the workspace beforehand cannot carry an entry out.
func TestExtractThroughPlantedSymlink(t *testing.T) {
	f := newFixture(t, Options{})
	f.symlink(t, f.outside, "planted")
	_, err := f.ws.ExtractArchive(context.Background(), ".", tarOf(t, tarEntry{name: "planted/evil", body: "x"}))
	wantCode(t, err, wire.CodeForbidden)
	_, err = f.ws.ExtractArchive(context.Background(), "planted", tarOf(t, tarEntry{name: "evil", body: "x"}))
	wantCode(t, err, wire.CodeForbidden)
	f.assertOutsideIntact(t)
}

func TestExtractLockedDirectory(t *testing.T) {
	f := newFixture(t, Options{})
	_, err := f.ws.ExtractArchive(context.Background(), "dst", tarOf(t,
		tarEntry{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		tarEntry{name: "ro/file", body: "inside"}))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(f.root, "dst/ro"))
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("ro: %v, %v", fi, err)
	}
	os.Chmod(filepath.Join(f.root, "dst/ro"), 0o755) // let t.TempDir clean up
}

func TestExtractCancelled(t *testing.T) {
	f := newFixture(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.ws.ExtractArchive(ctx, "dst", tarOf(t, tarEntry{name: "a", body: "x"}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// countingWriter discards what it is given and counts it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// heapGrowth runs fn and returns how many bytes it allocated in total.
func heapGrowth(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestArchiveStreamsWithBoundedMemory(t *testing.T) {
	const size = 50 << 20
	f := newFixture(t, Options{})
	big := filepath.Join(f.root, "src/big.bin")
	os.MkdirAll(filepath.Dir(big), 0o755)
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file still reads as 50 MB of data.
	if err := fh.Truncate(size); err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("end"), size-3)
	fh.Close()
	ctx := context.Background()

	var cw countingWriter
	var werr error
	grew := heapGrowth(func() { werr = f.ws.WriteArchive(ctx, "src", &cw) })
	if werr != nil {
		t.Fatal(werr)
	}
	if cw.n < size {
		t.Fatalf("archive is %d bytes, want at least %d", cw.n, size)
	}
	t.Logf("WriteArchive of %d bytes allocated %d bytes", cw.n, grew)
	if grew > 4<<20 {
		t.Errorf("WriteArchive of 50 MB allocated %d bytes", grew)
	}

	var xerr error
	grew = heapGrowth(func() {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(f.ws.WriteArchive(ctx, "src", pw)) }()
		_, xerr = f.ws.ExtractArchive(ctx, "dst", pr)
		pr.CloseWithError(xerr)
	})
	if xerr != nil {
		t.Fatal(xerr)
	}
	t.Logf("WriteArchive piped into ExtractArchive allocated %d bytes", grew)
	if grew > 8<<20 {
		t.Errorf("streaming a 50 MB archive through extract allocated %d bytes", grew)
	}
	fi, err := os.Stat(filepath.Join(f.root, "dst/big.bin"))
	if err != nil || fi.Size() != size {
		t.Fatalf("extracted big.bin: %v, %v", fi, err)
	}
	tail := make([]byte, 3)
	xf, _ := os.Open(filepath.Join(f.root, "dst/big.bin"))
	xf.ReadAt(tail, size-3)
	xf.Close()
	if string(tail) != "end" {
		t.Errorf("extracted tail = %q", tail)
	}
}

// Entries replace what is in their way as tar does, and a symlink in the
// way is replaced rather than written through.
func TestExtractReplacesExisting(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "dst/file", "old")
	f.write(t, "dst/keep.txt", "keep")
	f.symlink(t, "keep.txt", "dst/link")
	f.write(t, "dst/wasfile", "file")
	os.MkdirAll(filepath.Join(f.root, "dst/isdir/sub"), 0o755)
	ctx := context.Background()
	_, err := f.ws.ExtractArchive(ctx, "dst", tarOf(t,
		tarEntry{name: "file", body: "new"},
		tarEntry{name: "link", body: "replaced the link"},
		tarEntry{name: "wasfile/", typ: tar.TypeDir, mode: 0o755},
	))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"file": "new", "link": "replaced the link", "keep.txt": "keep"} {
		if got, _ := os.ReadFile(filepath.Join(f.root, "dst", name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(f.root, "dst/link")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(f.root, "dst/wasfile")); err != nil || !fi.IsDir() {
		t.Errorf("wasfile: %v, %v", fi, err)
	}
	_, err = f.ws.ExtractArchive(ctx, "dst", tarOf(t, tarEntry{name: "isdir", body: "x"}))
	wantCode(t, err, wire.CodeConflict)
	_, err = f.ws.ExtractArchive(ctx, "dst/file", tarOf(t, tarEntry{name: "x", body: "x"}))
	wantCode(t, err, wire.CodeBadRequest)
}
