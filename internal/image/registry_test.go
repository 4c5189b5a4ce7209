//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testRegistry is go-containerregistry's registry served over real HTTP
// on loopback, with a wrapper that counts blob downloads and can serve
// what a hostile or broken registry would.
type testRegistry struct {
	srv  *httptest.Server
	host string

	mu       sync.Mutex
	blobGets map[string]int    // "repo@digest" -> GETs
	replace  map[string][]byte // digest -> bytes served instead
	deny     map[string]bool   // "repo@digest" -> 404
	users    map[string]string // repo prefix -> "user:password" required
	// stall holds a blob's download half way until the channel closes.
	stall map[string]chan struct{}
}

var blobPath = regexp.MustCompile(`^/v2/(.+)/blobs/(sha256:[a-f0-9]{64})$`)
var repoPath = regexp.MustCompile(`^/v2/(.+)/(blobs|manifests)/`)

func newRegistry(t testing.TB) *testRegistry {
	t.Helper()
	r := &testRegistry{blobGets: map[string]int{}, replace: map[string][]byte{}, deny: map[string]bool{}, users: map[string]string{},
		stall: map[string]chan struct{}{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if m := repoPath.FindStringSubmatch(req.URL.Path); m != nil && !r.authorized(m[1], req) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}`, http.StatusUnauthorized)
			return
		}
		if m := blobPath.FindStringSubmatch(req.URL.Path); m != nil && req.Method == http.MethodGet {
			r.mu.Lock()
			if req.Context().Value(noStall{}) == nil {
				r.blobGets[m[1]+"@"+m[2]]++
			}
			repl, replaced := r.replace[m[2]]
			denied := r.deny[m[1]+"@"+m[2]]
			stall := r.stall[m[2]]
			if req.Context().Value(noStall{}) != nil {
				stall = nil
			}
			r.mu.Unlock()
			if stall != nil {
				r.serveStalled(w, req, m[2], stall)
				return
			}
			if denied {
				http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"no such blob"}]}`, http.StatusNotFound)
				return
			}
			if replaced {
				w.Header().Set("Content-Length", fmt.Sprint(len(repl)))
				w.Header().Set("Docker-Content-Digest", m[2])
				w.Write(repl)
				return
			}
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// serveStalled sends the first half of a blob, then the rest once stall
// is closed (or nothing more if the client goes away first).
func (r *testRegistry) serveStalled(w http.ResponseWriter, req *http.Request, digest string, stall chan struct{}) {
	rec := httptest.NewRecorder()
	inner := *req
	r.srv.Config.Handler.(http.HandlerFunc)(rec, inner.WithContext(context.WithValue(req.Context(), noStall{}, true)))
	body := rec.Body.Bytes()
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.Header().Set("Docker-Content-Digest", digest)
	w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	select {
	case <-stall:
		w.Write(body[len(body)/2:])
	case <-req.Context().Done():
	}
}

// noStall marks the request serveStalled makes to get the blob.
type noStall struct{}

func (r *testRegistry) authorized(repo string, req *http.Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for prefix, cred := range r.users {
		if strings.HasPrefix(repo, prefix) {
			u, p, ok := req.BasicAuth()
			return ok && u+":"+p == cred
		}
	}
	return true
}

func (r *testRegistry) gets(repo, digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets[repo+"@"+digest]
}

func (r *testRegistry) totalGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.blobGets {
		n += v
	}
	return n
}

// testLayer is a layer as pushed: its blob and the tar inside.
type testLayer struct {
	blob      []byte
	diffID    string
	digest    string
	mediaType types.MediaType
	size      int // of the tar
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// gzLayer compresses a tar into a gzip layer.
func gzLayer(t testing.TB, tarball []byte) testLayer {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(tarball)
	zw.Close()
	return testLayer{blob: buf.Bytes(), diffID: sha(tarball), digest: sha(buf.Bytes()), mediaType: types.OCILayer, size: len(tarball)}
}

// rawLayer is an uncompressed layer: its digest is its diff ID.
func rawLayer(tarball []byte) testLayer {
	return testLayer{blob: tarball, diffID: sha(tarball), digest: sha(tarball), mediaType: types.OCIUncompressedLayer, size: len(tarball)}
}

type imageSpec struct {
	arch   string // default: this host's
	config Config
	// diffIDs, when set, replace the layers' own in the config.
	diffIDs []string
}

// push uploads the layers and config and puts a manifest under repo:tag,
// returning the manifest's digest.
func (r *testRegistry) push(t testing.TB, repoTag string, spec imageSpec, layers ...testLayer) string {
	t.Helper()
	repo, tag, _ := strings.Cut(repoTag, ":")
	arch := spec.arch
	if arch == "" {
		arch = goruntime.GOARCH
	}
	diffIDs := spec.diffIDs
	if diffIDs == nil {
		for _, l := range layers {
			diffIDs = append(diffIDs, l.diffID)
		}
	}
	cfg, _ := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": map[string]any{"Env": spec.config.Env, "WorkingDir": spec.config.WorkingDir, "User": spec.config.User,
			"Entrypoint": spec.config.Entrypoint, "Cmd": spec.config.Cmd},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	type desc struct {
		MediaType types.MediaType `json:"mediaType"`
		Digest    string          `json:"digest"`
		Size      int             `json:"size"`
	}
	r.putBlob(t, repo, cfg, types.OCIConfigJSON)
	mf := map[string]any{"schemaVersion": 2, "mediaType": types.OCIManifestSchema1,
		"config": desc{types.OCIConfigJSON, sha(cfg), len(cfg)}, "layers": []desc{}}
	var ls []desc
	for _, l := range layers {
		r.putBlob(t, repo, l.blob, l.mediaType)
		ls = append(ls, desc{l.mediaType, l.digest, len(l.blob)})
	}
	if ls != nil {
		mf["layers"] = ls
	}
	body, _ := json.Marshal(mf)
	return r.putManifest(t, repo, tag, body, types.OCIManifestSchema1)
}

// pushIndex puts an index of the given manifests (by platform) under
// repo:tag.
func (r *testRegistry) pushIndex(t testing.TB, repoTag string, manifests map[string]string) string {
	t.Helper()
	repo, tag, _ := strings.Cut(repoTag, ":")
	var list []map[string]any
	for arch, d := range manifests {
		size := r.manifestSize(t, repo, d)
		list = append(list, map[string]any{"mediaType": types.OCIManifestSchema1, "digest": d, "size": size,
			"platform": map[string]string{"os": "linux", "architecture": arch}})
	}
	body, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": list})
	return r.putManifest(t, repo, tag, body, types.OCIImageIndex)
}

func (r *testRegistry) manifestSize(t testing.TB, repo, digest string) int {
	t.Helper()
	resp, err := http.Get(r.srv.URL + "/v2/" + repo + "/manifests/" + digest)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return len(b)
}

func (r *testRegistry) putBlob(t testing.TB, repo string, b []byte, mt types.MediaType) {
	t.Helper()
	ref, err := name.NewRepository(r.host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteLayer(ref, static.NewLayer(b, mt)); err != nil {
		t.Fatalf("push blob to %s: %v", repo, err)
	}
}

func (r *testRegistry) putManifest(t testing.TB, repo, tag string, body []byte, mt types.MediaType) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, r.srv.URL+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(body))
	req.Header.Set("Content-Type", string(mt))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("put manifest %s:%s: %s", repo, tag, resp.Status)
	}
	return sha(body)
}

// ent is a tar entry; Body is a regular file's content.
type ent struct {
	tar.Header
	Body string
}

func file(name, body string) ent {
	return ent{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644}, Body: body}
}

func dir(name string) ent {
	return ent{Header: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

func symlink(name, target string) ent {
	return ent{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

func hardlink(name, target string) ent {
	return ent{Header: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target, Mode: 0o644}}
}

func tarOf(t testing.TB, ents ...ent) []byte {
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

// hostRootfs is a tar of the host's bash and the libraries it loads, at
// their paths: a small real root filesystem.
func hostRootfs(t testing.TB) []byte {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this host")
	}
	paths := []string{bash}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", bash, err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") {
			paths = append(paths, f)
		}
	}
	ents := []ent{dir("etc/"), file("etc/hostname", "image\n"), dir("tmp/")}
	ents[2].Mode = 0o1777
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e := file(strings.TrimPrefix(p, "/"), string(b))
		e.Mode = 0o755
		ents = append(ents, e)
	}
	if !seen["/bin/bash"] {
		e := file("bin/bash", "")
		b, _ := os.ReadFile(bash)
		e.Body, e.Mode = string(b), 0o755
		ents = append(ents, e)
	}
	return tarOf(t, ents...)
}

// openCache opens a cache in a new directory that reaches r over plain
// HTTP.
func openCache(t testing.TB, r *testRegistry, opts Options) *Cache {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the image cache needs root")
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "cache")
	}
	if r != nil {
		opts.PlainHTTP = append(opts.PlainHTTP, r.host)
	}
	c, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
