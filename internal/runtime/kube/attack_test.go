package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
	"github.com/berth-mcp/berth/internal/store/storetest"
)

// The sandbox limits of TestAttacks, small so the limit attacks are
// quick. /dev/shm is the pod sandbox's, which containerd makes 64 MiB.
const (
	attackMemory    = 256 << 20
	attackWorkspace = 64 << 20
	attackTmp       = 32 << 20
	attackShm       = 64 << 20
)

// TestAttacks makes every attack of runtimetest from inside sandbox pods
// on the real node, through a berth on the Kubernetes runtime acting as
// its ServiceAccount with the shipped Role. The stand-in kubelet runs
// pods as host processes without any isolation: there is nothing to
// attack, and the test says so and skips.
func TestAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	if !onRealNode() {
		t.Skipf("the attacks need sandbox pods in real containers; they run on %s", nodeNote)
	}
	t.Logf("sandbox pods run on %s", nodeNote)
	ns := node.Namespace(t, "attack")
	applyShippedRBACOn(t, node, ns)
	cfg := node.ConfigFor(t, ns, "berth")
	rt, err := kube.New(context.Background(), kube.Options{Config: cfg, Namespaces: []string{ns}, AgentImage: agentImage,
		ImagePullPolicy: importedPolicy, Memory: "256Mi", WorkspaceSize: "64Mi", TmpSize: "32Mi"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	rootOnly := filepath.Join(t.TempDir(), "root-only")
	b := make([]byte, 16)
	rand.Read(b)
	if err := os.WriteFile(rootOnly, []byte("root-only-"+hex.EncodeToString(b)), 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := storetest.URL(t)
	st := storetest.Open(t, dbURL)
	svc, err := orchestrator.New(st, rt, orchtest.Config(orchestrator.Config{Logger: orchtest.Logger(t), ReadyTimeout: time.Minute, DefaultNamespace: ns}))
	if err != nil {
		t.Fatal(err)
	}
	orchtest.Run(t, svc)
	url := orchtest.Serve(t, func(string) http.Handler {
		return api.NewServer(svc, api.Options{Auth: auth.MiddlewareOptions{Authenticators: []auth.Authenticator{svc}, Realm: "berth"}})
	})
	runtimetest.Attacks(t, &runtimetest.Berth{
		Svc: svc, Runtime: rt, Image: sandboxImage, URL: url, DatabaseAddr: "127.0.0.1:5432",
		// berth's ServiceAccount token, too: a sandbox holding it would
		// act as berth in the cluster.
		Secrets:     []string{string(orchtest.ServerKey), dbURL, cfg.BearerToken},
		SecretFiles: []string{rootOnly},
		MemoryBytes: attackMemory, DiskBytes: attackWorkspace, TmpBytes: attackTmp, Pids: nodePidsLimit,
		MaxOutputBytes: orchestrator.DefaultMaxOutputBytes,
		// The pod's root is the image's, its uid is runAsUser alone, its
		// workspace an emptyDir that goes with it, its disk sizes are
		// emptyDir sizeLimits (enforced by eviction), and its /dev/shm
		// is the pod sandbox's.
		ImageRoot: true, OneUser: true, RestartLosesFiles: true, DiskLimitEvicts: true, ShmBytes: attackShm,
	})
}
