package kube_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/kubetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

// sameImageCheck runs in each sandbox of the image: its marker, its
// Debian release, its Env, and real work by its python3 and bash.
const sameImageCheck = `cat /etc/berth-same-image
. /etc/os-release && echo "os=$ID $VERSION_ID"
echo "env=$BERTH_SAME_IMAGE"
python3 -c 'import hashlib; print("python", hashlib.sha256(b"berth").hexdigest())'
echo "bash=$(printf '%s\n' c a b | sort | tr -d '\n') pwd=$PWD"`

// TestSameImageOnBothRuntimes serves one image from one registry on
// loopback and starts it by the same reference through berth on the
// local runtime and through berth on the Kubernetes runtime on the real
// node, whose containerd pulls it from that registry: inside, both
// sandboxes are that image (its marker, Debian release and Env) and run
// its python3 and bash alike. A tag that moves is followed by both (on
// Kubernetes berth asks the kubelet to pull a tag at every start, as the
// local cache resolves it at every start); a digest names the same
// content on both.
func TestSameImageOnBothRuntimes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	if !onRealNode() {
		t.Skipf("needs a real node to pull the image; sandbox pods run on %s", nodeNote)
	}
	ctx := context.Background()
	// On 127.0.0.1 the node's containerd pulls over plain HTTP with no
	// configuration (see kubetest's containerd config).
	reg := imagetest.NewRegistry(t)
	repo := reg.Host + "/berth/same"
	tag := repo + ":1"
	built := time.Now()
	base := debianBase(t, tag)
	one, oneLayer := pushVersion(t, base, tag, "one")
	t.Logf("built and pushed %s in %s", tag, time.Since(built).Round(time.Millisecond))

	krt, ns := newRuntimeAsIs(t, node, kube.Options{})
	ke := orchtest.NewOn(t, krt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	lrt := orchtest.NewRuntimeWith(t, local.Options{DataDir: orchtest.DataDir(t), AgentBinary: agentBin,
		PlainHTTPRegistries: []string{reg.Host}, Logger: orchtest.Logger(t)})
	le := orchtest.NewOn(t, lrt, orchestrator.Config{Logger: orchtest.Logger(t)})
	sides := []*sameSide{{name: "kubernetes (real node)", e: ke, ns: ns}, {name: "local", e: le}}
	for _, s := range sides {
		_, s.p = s.e.Token(t, "same-image")
		c, err := s.e.Svc.RegisterClient(ctx, s.p, orchestrator.RegisterClientRequest{Name: "same", Namespace: s.ns})
		if err != nil {
			t.Fatal(err)
		}
		s.client = c.ID
	}

	sum := sha256.Sum256([]byte("berth"))
	want := func(marker string) string {
		return "marker=" + marker + "\nos=debian 12\nenv=from-the-image\npython " + hex.EncodeToString(sum[:]) + "\nbash=abc pwd=/workspace\n"
	}
	// run starts ref on both runtimes, each pulling from the registry
	// when pull says so, and checks what is inside.
	run := func(ref, marker string, layer v1.Hash, pull bool) {
		t.Helper()
		for _, s := range sides {
			gets := reg.Gets("berth/same", layer.String())
			out := s.start(t, ref)
			if out != want(marker) {
				t.Errorf("%s, sandbox of %s:\n%s\nwant:\n%s", s.name, ref, out, want(marker))
			}
			if pulled := reg.Gets("berth/same", layer.String()) > gets; pulled != pull {
				t.Errorf("%s, sandbox of %s: pulled its top layer from the registry: %v, want %v", s.name, ref, pulled, pull)
			}
		}
	}
	run(tag, "one", oneLayer, true)

	// The tag moves: both runtimes ask the registry and start the new
	// image.
	two, twoLayer := pushVersion(t, base, tag, "two")
	run(tag, "two", twoLayer, true)

	// By digest: the first image again, already on both, unchanged.
	run(repo+"@"+one.String(), "one", oneLayer, false)
	if one == two {
		t.Fatal("the two versions have one digest")
	}
}

// sameSide is one berth of TestSameImageOnBothRuntimes.
type sameSide struct {
	name   string
	e      *orchtest.Env
	ns     string
	p      rbac.Principal
	client string
}

// start starts a server of ref through berth, runs sameImageCheck in it
// and stops it, returning what the check printed.
func (s *sameSide) start(t *testing.T, ref string) string {
	t.Helper()
	ctx := context.Background()
	p := s.p
	began := time.Now()
	op, err := s.e.Svc.StartServer(ctx, p, orchestrator.StartServerRequest{ClientID: s.client, ImageTag: ref, WaitSeconds: deadline.Seconds()})
	if err != nil || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("%s: start from %s: %v %s %s", s.name, ref, err, op.Status, op.Error)
	}
	t.Logf("%s: started from %s in %s", s.name, ref, time.Since(began).Round(time.Millisecond))
	defer s.e.Svc.StopServer(ctx, p, orchestrator.ServerRef{ServerID: op.ServerID})
	res, err := s.e.Svc.SessionExec(ctx, p, op.ServerID, "check", wire.SessionExecRequest{Command: sameImageCheck, Timeout: deadline.Seconds()})
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	if res.ExitCode != 0 || res.Stderr != "" {
		t.Errorf("%s, sandbox of %s: exit %v, stderr %q", s.name, ref, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// debianBase is the Debian image of the host's packages, with an Env of
// its own, as go-containerregistry builds it.
func debianBase(t *testing.T, ref string) v1.Image {
	t.Helper()
	img, err := kubetest.DebianImage(context.Background(), ref, "")
	if err != nil {
		t.Fatal(err)
	}
	img.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "BERTH_SAME_IMAGE=from-the-image"}
	base, err := img.Image(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// pushVersion pushes base with a layer of /etc/berth-same-image saying
// marker as ref, returning the image's digest and that layer's.
func pushVersion(t *testing.T, base v1.Image, ref, marker string) (v1.Hash, v1.Hash) {
	t.Helper()
	tb := imagetest.Tar(t, imagetest.File("etc/berth-same-image", "marker="+marker+"\n"))
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	tagRef, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tagRef, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ld, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d, ld
}
