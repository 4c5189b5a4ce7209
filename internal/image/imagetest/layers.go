package imagetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layer is a layer as pushed: its blob and what the tar inside it is.
type Layer struct {
	Blob      []byte
	DiffID    string // the uncompressed tar's digest
	Digest    string // the blob's
	MediaType types.MediaType
	Size      int // of the tar
}

// Digest is b's sha256 digest, as OCI writes it.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// GzLayer compresses a tar into a gzip layer.
func GzLayer(t testing.TB, tarball []byte) Layer {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(tarball)
	zw.Close()
	return Layer{Blob: buf.Bytes(), DiffID: Digest(tarball), Digest: Digest(buf.Bytes()), MediaType: types.OCILayer, Size: len(tarball)}
}

// RawLayer is an uncompressed layer: its digest is its diff ID.
func RawLayer(tarball []byte) Layer {
	return Layer{Blob: tarball, DiffID: Digest(tarball), Digest: Digest(tarball), MediaType: types.OCIUncompressedLayer, Size: len(tarball)}
}

// Entry is a tar entry; Body is a regular file's content.
type Entry struct {
	tar.Header
	Body string
}

// File is a regular file of mode 0644.
func File(name, body string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644}, Body: body}
}

// Dir is a directory of mode 0755; name ends in a slash.
func Dir(name string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

// Symlink is a symbolic link to target.
func Symlink(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

// Hardlink is a hard link to target, a name in the same archive.
func Hardlink(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target, Mode: 0o644}}
}

// Tar writes the entries, in order, as a tar.
func Tar(t testing.TB, ents ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.Header
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar header %q: %v", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, e.Body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// HostRootfs is a tar of the host's bash and the libraries it loads, at
// their paths, with /etc, /tmp and the extra programs (looked up on
// PATH unless absolute, with their libraries): a small real root
// filesystem. It skips the test on a host without bash or ldd.
func HostRootfs(t testing.TB, programs ...string) []byte {
	t.Helper()
	return Tar(t, HostRootfsEntries(t, programs...)...)
}

// HostRootfsEntries are HostRootfs's entries, for a test to add its own.
func HostRootfsEntries(t testing.TB, programs ...string) []Entry {
	t.Helper()
	var paths []string
	for _, prog := range append([]string{"bash"}, programs...) {
		p, err := exec.LookPath(prog)
		if err != nil {
			t.Skipf("no %s on this host", prog)
		}
		paths = append(paths, p)
	}
	ents := []Entry{Dir("etc/"), File("etc/hostname", "image\n"), Dir("tmp/")}
	ents[2].Mode = 0o1777
	ents = append(ents, HostFiles(t, paths...)...)
	if !slices.Contains(paths, "/bin/bash") {
		b, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		e := File("bin/bash", string(b))
		e.Mode = 0o755
		ents = append(ents, e)
	}
	return Unique(ents)
}

// HostFiles are the host's files at paths (absolute; symlinks followed)
// and the shared libraries ldd says they load, each at its own path.
func HostFiles(t testing.TB, paths ...string) []Entry {
	t.Helper()
	var all []string
	for _, p := range paths {
		all = append(all, p)
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			// A static program or a script has no libraries (ldd says
			// so and fails).
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				all = append(all, f)
			}
		}
	}
	var ents []Entry
	seen := map[string]bool{}
	for _, p := range all {
		if seen[p] {
			continue
		}
		seen[p] = true
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		e := File(strings.TrimPrefix(p, "/"), string(b))
		e.Mode = int64(st.Mode().Perm())
		ents = append(ents, e)
	}
	return ents
}

// Unique keeps the first entry of each name.
func Unique(ents []Entry) []Entry {
	seen := map[string]bool{}
	out := ents[:0:0]
	for _, e := range ents {
		name := strings.TrimSuffix(strings.TrimPrefix(e.Name, "./"), "/")
		if !seen[name] {
			seen[name] = true
			out = append(out, e)
		}
	}
	return out
}

// HostTree is the host directory dir (absolute) as entries at its own
// path: directories, regular files and symlinks, without the entries
// skip names (paths relative to dir). For an image that needs a whole
// tree of the host's, such as an interpreter's library.
func HostTree(t testing.TB, dir string, skip func(rel string) bool) []Entry {
	t.Helper()
	var ents []Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." && skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := strings.TrimPrefix(p, "/")
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			e := Dir(name + "/")
			e.Mode = int64(info.Mode().Perm())
			ents = append(ents, e)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			ents = append(ents, Symlink(name, target))
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e := File(name, string(b))
			e.Mode = int64(info.Mode().Perm())
			ents = append(ents, e)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("host tree %s: %v", dir, err)
	}
	return ents
}
