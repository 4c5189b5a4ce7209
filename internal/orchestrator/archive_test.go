package orchestrator_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	kind             byte
}

// tarOf builds a tar archive of entries (regular files unless kind says
// otherwise).
func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.kind, Linkname: e.link}
		if e.kind == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if e.kind == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// members reads a tar archive into name -> body (files) or "-> target"
// (symlinks).
func members(t testing.TB, archive []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read downloaded archive: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		default:
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func (h running) download(t testing.TB, path string) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	n, err := h.e.Svc.DownloadArchive(context.Background(), h.alice, orchestrator.ArchiveRequest{ServerID: h.server, Path: path}, &b)
	if err == nil && n != int64(b.Len()) {
		t.Fatalf("download %s: said %d bytes, wrote %d", path, n, b.Len())
	}
	return b.Bytes(), err
}

func (h running) upload(path string, archive []byte) (orchestrator.ArchiveResult, error) {
	return h.e.Svc.UploadArchive(context.Background(), h.alice, orchestrator.ArchiveRequest{ServerID: h.server, Path: path}, bytes.NewReader(archive))
}

// sh runs a command in the sandbox and returns its stdout, failing the
// test unless it exits 0.
func (h running) sh(t testing.TB, command string) string {
	t.Helper()
	res := bash(t, h.e.Svc, h.alice, h.server, command, nil)
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: %s", command, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// TestArchiveRoundTrip downloads a directory of a real sandbox's
// workspace as a stream and inline, uploads it back both ways, and checks
// the errors a caller can cause: no tar, a path out of the workspace, too
// large.
func TestArchiveRoundTrip(t *testing.T) {
	h := newRunning(t, orchestrator.Config{MaxArchiveBytes: 1 << 20, MaxInlineArchiveBytes: 256 << 10})
	ctx := context.Background()
	h.sh(t, "mkdir -p proj/sub && printf hi > proj/sub/a.txt && ln -s a.txt proj/sub/link")

	archive, err := h.download(t, "proj")
	if err != nil {
		t.Fatal(err)
	}
	got := members(t, archive)
	if got["sub/a.txt"] != "hi" || got["sub/link"] != "-> a.txt" {
		t.Fatalf("archive of proj holds %q", got)
	}
	res, err := h.upload("copy", archive)
	if err != nil || res.Path != "copy" || res.Bytes != 2 {
		t.Fatalf("upload: %+v %v", res, err)
	}
	if out := h.sh(t, "cat copy/sub/a.txt; readlink copy/sub/link"); out != "hi"+"a.txt\n" {
		t.Fatalf("extracted: %q", out)
	}

	inline, err := h.e.Svc.DownloadArchiveInline(ctx, h.alice, orchestrator.ArchiveRequest{ServerID: h.server, Path: "proj/sub/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(inline.ArchiveBase64)
	if m := members(t, raw); m["a.txt"] != "hi" || inline.Bytes != int64(len(raw)) {
		t.Fatalf("inline archive of a file: %q (%d bytes said)", m, inline.Bytes)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarOf(t, entry{name: "z.txt", body: "zipped"}))
	zw.Close()
	if _, err := h.e.Svc.UploadArchiveInline(ctx, h.alice, orchestrator.UploadArchiveRequest{
		ServerID: h.server, ArchiveBase64: base64.StdEncoding.EncodeToString(gz.Bytes()),
	}); err != nil {
		t.Fatal(err)
	}
	if out := h.sh(t, "cat z.txt"); out != "zipped" {
		t.Fatalf("inline gzip upload wrote %q", out)
	}

	t.Run("errors", func(t *testing.T) {
		_, err := h.upload(".", []byte("just some text, long enough to be taken for a header if nobody checked"))
		wantCode(t, err, wire.CodeBadRequest, "tar")
		_, err = h.upload(".", bytes.Repeat([]byte("x"), 600))
		wantCode(t, err, wire.CodeBadRequest, "no tar header")
		_, err = h.upload(".", nil)
		wantCode(t, err, wire.CodeBadRequest, "empty body")
		_, err = h.download(t, "../..")
		wantCode(t, err, wire.CodeForbidden)
		_, err = h.download(t, "missing")
		wantCode(t, err, wire.CodeNotFound)
		_, err = h.upload("../up", tarOf(t, entry{name: "f", body: "x"}))
		wantCode(t, err, wire.CodeForbidden)
		_, err = h.e.Svc.UploadArchiveInline(ctx, h.alice, orchestrator.UploadArchiveRequest{ServerID: h.server, ArchiveBase64: "not base64!"})
		wantCode(t, err, wire.CodeBadRequest, "archive_base64")
	})

	t.Run("limits", func(t *testing.T) {
		big := tarOf(t, entry{name: "big", body: strings.Repeat("b", 2<<20)})
		_, err := h.upload("big", big)
		wantCode(t, err, wire.CodeTooLarge, "1048576", "--max-archive-bytes")
		_, err = h.e.Svc.UploadArchiveInline(ctx, h.alice, orchestrator.UploadArchiveRequest{ServerID: h.server, ArchiveBase64: base64.StdEncoding.EncodeToString(big)})
		wantCode(t, err, wire.CodeTooLarge, "archive_base64", "262144")
		// The largest inline upload fits the body an adapter is told to
		// accept, and is extracted.
		most := tarOf(t, entry{name: "most", body: strings.Repeat("m", 256<<10-3*512)})
		req := orchestrator.UploadArchiveRequest{ServerID: h.server, Path: "most", ArchiveBase64: base64.StdEncoding.EncodeToString(most)}
		if body, _ := json.Marshal(req); int64(len(body)) > h.e.Svc.InlineArchiveRequestBytes() {
			t.Errorf("an inline upload of %d bytes is a %d-byte request, more than InlineArchiveRequestBytes %d", len(most), len(body), h.e.Svc.InlineArchiveRequestBytes())
		}
		if _, err := h.e.Svc.UploadArchiveInline(ctx, h.alice, req); err != nil {
			t.Errorf("inline upload of %d bytes, the limit: %v", len(most), err)
		}
		h.sh(t, "head -c 3000000 /dev/urandom > noise")
		_, err = h.download(t, "noise")
		wantCode(t, err, wire.CodeTooLarge, "1048576")
		_, err = h.e.Svc.DownloadArchiveInline(ctx, h.alice, orchestrator.ArchiveRequest{ServerID: h.server, Path: "noise"})
		wantCode(t, err, wire.CodeTooLarge, "262144", "--max-inline-archive-bytes")
	})

	t.Run("rbac", func(t *testing.T) {
		bob := principal(t, h.e.Svc, "bob")
		_, err := h.e.Svc.DownloadArchive(ctx, bob, orchestrator.ArchiveRequest{ServerID: h.server}, io.Discard)
		wantCode(t, err, wire.CodeNotFound)
		_, err = h.e.Svc.UploadArchive(ctx, bob, orchestrator.ArchiveRequest{ServerID: h.server}, bytes.NewReader(tarOf(t, entry{name: "f"})))
		wantCode(t, err, wire.CodeNotFound)
		reader := principal(t, h.e.Svc, "alice", "berth:read")
		_, err = h.e.Svc.DownloadArchive(ctx, reader, orchestrator.ArchiveRequest{ServerID: h.server}, io.Discard)
		wantCode(t, err, wire.CodeForbidden, "berth:exec")
	})
}

// TestArchiveAttacks uploads hostile archives into a real sandbox and
// plants links there: nothing is written outside the workspace, and no
// host file is read through a link, whether the archive or the sandbox
// made it.
func TestArchiveAttacks(t *testing.T) {
	h := newRunning(t, orchestrator.Config{})
	// A host file next to the sandbox's data, readable by anyone on the
	// host: no link may bring it into an archive.
	secret := filepath.Join(h.e.DataDir, "host-secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET-5f2c"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostTarget := filepath.Join(h.e.DataDir, "planted")

	hostile := []struct {
		name    string
		archive []byte
	}{
		{"dot-dot", tarOf(t, entry{name: "../escaped", body: "x"})},
		{"deep dot-dot", tarOf(t, entry{name: "a/../../escaped", body: "x"})},
		{"absolute", tarOf(t, entry{name: "/tmp/escaped", body: "x"})},
		{"absolute host", tarOf(t, entry{name: hostTarget, body: "x"})},
		{"symlink out then through it", tarOf(t, entry{name: "out", kind: tar.TypeSymlink, link: "/tmp"}, entry{name: "out/escaped", body: "x"})},
		{"relative symlink out", tarOf(t, entry{name: "up", kind: tar.TypeSymlink, link: "../../.."}, entry{name: "up/tmp/escaped", body: "x"})},
		{"symlink to a host file", tarOf(t, entry{name: "secret", kind: tar.TypeSymlink, link: secret})},
		{"hard link out", tarOf(t, entry{name: "hard", kind: tar.TypeLink, link: "../../etc/passwd"})},
	}
	for _, c := range hostile {
		_, err := h.upload(".", c.archive)
		if err == nil {
			t.Errorf("%s: upload accepted", c.name)
			continue
		}
		if d := wire.DetailOf(err); d.Code != wire.CodeForbidden && d.Code != wire.CodeBadRequest {
			t.Errorf("%s: %s %s, want forbidden or bad_request", c.name, d.Code, d.Message)
		}
	}

	// Links the sandbox makes itself, then uses as the destination, as a
	// step of an entry's path, and as what to download.
	h.sh(t, "ln -s /tmp tmplink && ln -s "+secret+" secretlink && ln -s / rootlink && mkdir -p d && ln -s ../../ d/up")
	for _, dest := range []string{"tmplink", "rootlink/tmp", "d/up"} {
		if _, err := h.upload(dest, tarOf(t, entry{name: "escaped", body: "x"})); err == nil {
			t.Errorf("upload into the sandbox's link %s accepted", dest)
		}
	}
	for _, name := range []string{"tmplink/escaped", "d/up/escaped"} {
		if _, err := h.upload(".", tarOf(t, entry{name: name, body: "x"})); err == nil {
			t.Errorf("upload of entry %s accepted", name)
		}
	}
	if out := h.sh(t, "ls -A /tmp; ls / | grep -c escaped || true"); out != "0\n" {
		t.Errorf("something was written outside the workspace: %q", out)
	}
	if _, err := os.Lstat(hostTarget); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host path %s exists after the uploads: %v", hostTarget, err)
	}

	for _, path := range []string{"secretlink", "tmplink", "rootlink", "d/up"} {
		archive, err := h.download(t, path)
		if err == nil {
			t.Errorf("download of the sandbox's link %s accepted (%d bytes)", path, len(archive))
		}
	}
	archive, err := h.download(t, ".")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(archive, []byte("HOST-SECRET")) {
		t.Error("the workspace's archive holds the host file's content")
	}
	if got := members(t, archive)["secretlink"]; got != "-> "+secret {
		t.Errorf("secretlink in the archive: %q, want the link itself", got)
	}
}

// TestArchiveEndless has a sandbox answer a download with an archive that
// never ends: berth stops at its limit with too_large, and what it
// allocates meanwhile stays far below what it copied.
func TestArchiveEndless(t *testing.T) {
	const limit = 32 << 20
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/fs/archive", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		block := bytes.Repeat([]byte("endless "), 8<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(block); err != nil {
				return
			}
		}
	})
	h := newHostile(t, orchestrator.Config{MaxArchiveBytes: limit, MaxInlineArchiveBytes: 1 << 20}, mux)
	ctx := context.Background()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := h.e.Svc.DownloadArchive(ctx, h.alice, orchestrator.ArchiveRequest{ServerID: h.server}, io.Discard)
	runtime.ReadMemStats(&after)
	wantCode(t, err, wire.CodeTooLarge, "33554432")
	if n > limit || n < limit-(64<<10) {
		t.Errorf("copied %d bytes of the endless archive, want just under %d", n, limit)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > limit/4 {
		t.Errorf("berth allocated %d bytes while copying %d: the stream is buffered", grown, n)
	}
	t.Logf("copied %d bytes, allocated %d", n, after.TotalAlloc-before.TotalAlloc)

	_, err = h.e.Svc.DownloadArchiveInline(ctx, h.alice, orchestrator.ArchiveRequest{ServerID: h.server})
	wantCode(t, err, wire.CodeTooLarge, "1048576")
}
