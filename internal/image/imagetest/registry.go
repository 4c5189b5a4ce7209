// Package imagetest serves OCI images from a real registry on loopback
// for tests: go-containerregistry's registry over real HTTP, with images
// the tests build themselves (tar layers of their own entries, or of the
// host's bash and the libraries it loads), and a wrapper that counts
// blob downloads and can serve what a hostile or broken registry would.
// The image cache's tests and the local runtime's share it.
package imagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
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

// Registry is a registry on loopback, served until the test ends. Its
// references are Host + "/" + repo + ":" + tag, reached over plain HTTP.
type Registry struct {
	// Host is the registry's host:port, as references name it.
	Host string
	// URL is its base URL (http://Host).
	URL string
	srv *httptest.Server

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

// NewRegistry starts a registry on loopback, closed when the test ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{blobGets: map[string]int{}, replace: map[string][]byte{}, deny: map[string]bool{}, users: map[string]string{},
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
	r.URL = r.srv.URL
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// serveStalled sends the first half of a blob, then the rest once stall
// is closed (or nothing more if the client goes away first).
func (r *Registry) serveStalled(w http.ResponseWriter, req *http.Request, digest string, stall chan struct{}) {
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

func (r *Registry) authorized(repo string, req *http.Request) bool {
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

// RequireUser makes the repositories under prefix answer only requests
// with basic auth "user:password" as cred; "" lifts the requirement.
func (r *Registry) RequireUser(prefix, cred string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cred == "" {
		delete(r.users, prefix)
		return
	}
	r.users[prefix] = cred
}

// Deny makes the registry answer 404 for the blob digest of repo.
func (r *Registry) Deny(repo, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deny[repo+"@"+digest] = true
}

// Replace serves b in place of the blob digest, under its digest.
func (r *Registry) Replace(digest string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replace[digest] = b
}

// Stall holds downloads of the blob digest half way until the channel is
// closed.
func (r *Registry) Stall(digest string, until chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stall[digest] = until
}

// Gets counts the GETs of the blob digest from repo.
func (r *Registry) Gets(repo, digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blobGets[repo+"@"+digest]
}

// TotalGets counts every blob GET.
func (r *Registry) TotalGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.blobGets {
		n += v
	}
	return n
}

// Config is the part of an image's config tests set; its fields are the
// image cache's Config's, so one converts to the other.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// ImageSpec is what Push puts in an image besides its layers.
type ImageSpec struct {
	Arch   string // default: this host's
	Config Config
	// DiffIDs, when set, replace the layers' own in the config.
	DiffIDs []string
}

// Push uploads the layers and config and puts a manifest under
// repo:tag, returning the manifest's digest.
func (r *Registry) Push(t testing.TB, repoTag string, spec ImageSpec, layers ...Layer) string {
	t.Helper()
	repo, tag, _ := strings.Cut(repoTag, ":")
	arch := spec.Arch
	if arch == "" {
		arch = goruntime.GOARCH
	}
	diffIDs := spec.DiffIDs
	if diffIDs == nil {
		for _, l := range layers {
			diffIDs = append(diffIDs, l.DiffID)
		}
	}
	cfg, _ := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux", "created": time.Unix(0, 0).UTC(),
		"config": map[string]any{"Env": spec.Config.Env, "WorkingDir": spec.Config.WorkingDir, "User": spec.Config.User,
			"Entrypoint": spec.Config.Entrypoint, "Cmd": spec.Config.Cmd},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	type desc struct {
		MediaType types.MediaType `json:"mediaType"`
		Digest    string          `json:"digest"`
		Size      int             `json:"size"`
	}
	r.PutBlob(t, repo, cfg, types.OCIConfigJSON)
	mf := map[string]any{"schemaVersion": 2, "mediaType": types.OCIManifestSchema1,
		"config": desc{types.OCIConfigJSON, Digest(cfg), len(cfg)}, "layers": []desc{}}
	var ls []desc
	for _, l := range layers {
		r.PutBlob(t, repo, l.Blob, l.MediaType)
		ls = append(ls, desc{l.MediaType, l.Digest, len(l.Blob)})
	}
	if ls != nil {
		mf["layers"] = ls
	}
	body, _ := json.Marshal(mf)
	return r.PutManifest(t, repo, tag, body, types.OCIManifestSchema1)
}

// PushIndex puts an index of the given manifests (by architecture) under
// repo:tag.
func (r *Registry) PushIndex(t testing.TB, repoTag string, manifests map[string]string) string {
	t.Helper()
	repo, tag, _ := strings.Cut(repoTag, ":")
	var list []map[string]any
	for arch, d := range manifests {
		size := r.manifestSize(t, repo, d)
		list = append(list, map[string]any{"mediaType": types.OCIManifestSchema1, "digest": d, "size": size,
			"platform": map[string]string{"os": "linux", "architecture": arch}})
	}
	body, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": list})
	return r.PutManifest(t, repo, tag, body, types.OCIImageIndex)
}

func (r *Registry) manifestSize(t testing.TB, repo, digest string) int {
	t.Helper()
	resp, err := http.Get(r.URL + "/v2/" + repo + "/manifests/" + digest)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return len(b)
}

// PutBlob uploads b into repo.
func (r *Registry) PutBlob(t testing.TB, repo string, b []byte, mt types.MediaType) {
	t.Helper()
	ref, err := name.NewRepository(r.Host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteLayer(ref, static.NewLayer(b, mt)); err != nil {
		t.Fatalf("push blob to %s: %v", repo, err)
	}
}

// PutManifest puts body under repo:tag and returns its digest.
func (r *Registry) PutManifest(t testing.TB, repo, tag string, body []byte, mt types.MediaType) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, r.URL+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(body))
	req.Header.Set("Content-Type", string(mt))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("put manifest %s:%s: %s", repo, tag, resp.Status)
	}
	return Digest(body)
}
