package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options shape one control plane. The zero value is a good default.
type Options struct {
	// Nodes is how many Nodes the kubelet registers (default 3, so
	// required pod anti-affinity has room to spread).
	Nodes int
	// NodeCapacity is each Node's capacity and allocatable (default cpu 4,
	// memory 8Gi, pods 110, ephemeral-storage 20Gi).
	NodeCapacity corev1.ResourceList
	// BinDir holds the control plane binaries (default: $BERTH_KUBE_BIN).
	BinDir string
	// Dir holds data, certificates and logs. Start uses t.TempDir(); New
	// requires it.
	Dir string
	// KanikoImage is a substring: a container whose image contains it is
	// a Kaniko build (default "kaniko"); see Kubelet.KanikoRuns.
	KanikoImage string
	// RestartBackoff is the kubelet's first wait before restarting a
	// failed container or pulling a missing image again; it doubles up to
	// MaxRestartBackoff. Defaults 1s and 20s: a real kubelet's 10s and 5m
	// would make tests of CrashLoopBackOff slow for no insight.
	RestartBackoff, MaxRestartBackoff time.Duration
	// StartTimeout bounds starting everything (default 3m: a loaded
	// 2-core machine takes far longer than an idle one).
	StartTimeout time.Duration
	// Node says what runs the pods: the stand-in kubelet (NodeStandIn,
	// the default), a real node (NodeReal), or the real node where one
	// can start and the stand-in elsewhere (NodeAuto; see NodeEnv).
	// Nodes, NodeCapacity, KanikoImage and the back-offs are the
	// stand-in's; a real node has its own capacity, that of this host.
	Node NodeKind
	// NodeImages are imported into a real node before New returns (they
	// are ignored on the stand-in): pods use them with a pull policy that
	// does not pull. RealNode.Import imports more later.
	NodeImages []NodeImage
	// PodPidsLimit is a real node's process limit per pod (the kubelet's
	// podPidsLimit; default 1024).
	PodPidsLimit int64
}

// Env is a running control plane with its node: the stand-in kubelet or
// a real node.
type Env struct {
	// Admin is a client config for the API server as an admin
	// (group system:masters), unthrottled.
	Admin *rest.Config
	// Client is a clientset built from Admin.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Admin.
	Kubeconfig string
	// Kubectl is the path of the kubectl built with the control plane
	// (same version), "" when the folder has none; run it with
	// --kubeconfig Kubeconfig, or KubeconfigFor's file.
	Kubectl string
	// Nodes names the Nodes the kubelet registered, all Ready.
	Nodes []string
	// Kubelet is the stand-in kubelet running the Nodes' pods, nil on a
	// real node.
	Kubelet *Kubelet
	// Node is the real node running the pods, nil on the stand-in.
	Node *RealNode
	// NodeNote says what runs the pods, and for NodeAuto on the stand-in
	// why no real node could start: tests log it, so that a run on the
	// stand-in is never mistaken for one on a real node.
	NodeNote string
	// Dir holds the components' data and logs (<name>.log, kubelet.log).
	Dir string

	cp     *controlPlane
	cancel context.CancelFunc
}

// Start starts a control plane and a kubelet for t and stops them when t
// ends. Without the binaries it fails t, saying to run `make kubeenv`;
// under `go test -short` it skips t instead. Starting takes a few seconds
// (see the README); a package whose tests all need one may share one Env
// (New in TestMain) and give each test its own namespace.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("kubetest: needs a Kubernetes control plane; skipped under -short")
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	env, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.logTails(t)
		}
		env.Close()
	})
	return env
}

// New starts a control plane and a kubelet with their files under
// opts.Dir; Close stops them. It is Start for TestMain, where there is no
// t: errors.Is(err, ErrNoBinaries) tells that the binaries are missing.
func New(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.Dir == "" {
		return nil, errors.New("kubetest: Options.Dir is required")
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	bins, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	kind, note, err := ChooseNode(opts.Node, opts.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancelStart := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancelStart()
	cp, err := startControlPlane(ctx, bins, opts.Dir)
	// Another test binary may take a port between freePorts and the
	// component's bind: try again on fresh ports and a fresh etcd.
	for try := 1; err != nil && try < 3 && strings.Contains(err.Error(), "address already in use"); try++ {
		if rerr := os.RemoveAll(filepath.Join(opts.Dir, "etcd")); rerr != nil {
			return nil, fmt.Errorf("kubetest: start control plane again: %w", rerr)
		}
		cp, err = startControlPlane(ctx, bins, opts.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("kubetest: start control plane: %w", err)
	}
	// The environment's own context: it outlives New and ends in Close.
	runCtx, cancel := context.WithCancel(context.Background())
	env = &Env{cp: cp, cancel: cancel, Dir: opts.Dir, Kubectl: bins.kubectl, NodeNote: note}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	env.Admin = cp.configWithToken(cp.adminToken)
	env.Admin.QPS = -1 // no client-side throttling for the harness
	if env.Client, err = kubernetes.NewForConfig(env.Admin); err != nil {
		return nil, fmt.Errorf("kubetest: admin client: %w", err)
	}
	env.Kubeconfig = filepath.Join(opts.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(env.Kubeconfig, env.Admin, "default"); err != nil {
		return nil, err
	}
	if kind == NodeReal {
		if err := env.startRealNode(ctx, opts, bins); err != nil {
			return nil, err
		}
	} else {
		env.Kubelet, err = startKubelet(runCtx, ctx, kubeletConfig{
			client:      env.Client,
			dir:         filepath.Join(opts.Dir, "kubelet"),
			logPath:     filepath.Join(opts.Dir, "kubelet.log"),
			nodes:       opts.Nodes,
			capacity:    opts.NodeCapacity,
			pki:         cp.pki,
			apiPort:     cp.apiPort,
			kanikoImage: opts.KanikoImage,
			backoff:     opts.RestartBackoff,
			maxBackoff:  opts.MaxRestartBackoff,
		})
		if err != nil {
			return nil, fmt.Errorf("kubetest: start kubelet: %w", err)
		}
		env.Nodes = env.Kubelet.Nodes()
	}
	// Pods need their namespace's default ServiceAccount (admission
	// refuses them without it): wait until the controller made one.
	if _, err := env.waitServiceAccount(ctx, "default", "default"); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	return env, nil
}

// Close stops the kubelet (killing every container process) or the real
// node (deleting its pods and sweeping what is left), and then the
// control plane. It is safe to call more than once.
func (e *Env) Close() {
	if e.Kubelet != nil {
		e.Kubelet.stop()
	}
	if e.Node != nil {
		e.closeRealNode()
	}
	if e.cancel != nil {
		e.cancel()
	}
	if e.cp != nil {
		e.cp.stop()
	}
}

// Failed returns an error when a control plane component has exited.
func (e *Env) Failed() error { return e.cp.failed() }

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.NodeCapacity == nil {
		o.NodeCapacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		}
	}
	if o.KanikoImage == "" {
		o.KanikoImage = "kaniko"
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = time.Second
	}
	if o.MaxRestartBackoff < o.RestartBackoff {
		o.MaxRestartBackoff = max(20*time.Second, o.RestartBackoff)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.PodPidsLimit <= 0 {
		o.PodPidsLimit = 1024
	}
	return o
}

// logTails logs the end of every component's log, for a failed test.
func (e *Env) logTails(t testing.TB) {
	entries, _ := os.ReadDir(e.Dir)
	for _, ent := range entries {
		if filepath.Ext(ent.Name()) == ".log" {
			p := filepath.Join(e.Dir, ent.Name())
			t.Logf("kubetest: end of %s:\n%s", p, tail(p, 20))
		}
	}
}

// startRealNode starts the real node in a folder of its own: a short
// path under the system's temporary folder, since containerd's socket
// path is bounded (108 bytes) and a test's folder may be long.
func (e *Env) startRealNode(ctx context.Context, opts Options, bins binaries) error {
	dir, err := os.MkdirTemp("", "ktn-") // the sweeper removes only such folders
	if err != nil {
		return fmt.Errorf("kubetest: real node folder: %w", err)
	}
	e.Node, err = startRealNode(ctx, realNodeConfig{
		client: e.Client, pki: e.cp.pki, apiPort: e.cp.apiPort, kubeletBin: bins.kubelet,
		dir: dir, logDir: opts.Dir, images: opts.NodeImages, podPidsLimit: opts.PodPidsLimit,
	})
	if err != nil {
		// startRealNode stopped and swept what it started.
		removeNodeDir(dir)
		return fmt.Errorf("kubetest: start real node: %w", err)
	}
	e.Nodes = []string{e.Node.Name}
	total, images := e.Node.StartTime()
	e.NodeNote = fmt.Sprintf("the real node %s (kubelet %s, containerd and runc from Debian's packages), Ready in %s (%s of it writing and importing images)",
		e.Node.Name, kubeVersion, total.Round(time.Millisecond), images.Round(time.Millisecond))
	return nil
}

// closeRealNode stops the real node and removes its folder, unless
// something is still mounted there: removing files through a mount left
// behind would reach what it mounts.
func (e *Env) closeRealNode() {
	n := e.Node
	e.Node = nil
	n.stop(context.Background())
	if left := n.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "kubetest: the real node %s left behind (folder %s kept): %s\n", n.Name, n.dir, strings.Join(left, "; "))
		return
	}
	removeNodeDir(n.dir)
}

// removeNodeDir removes a real node's folder, unless something is still
// mounted under it: removing files through a mount would reach what it
// mounts.
func removeNodeDir(dir string) {
	if mounts := mountsUnder(dir); len(mounts) > 0 {
		fmt.Fprintf(os.Stderr, "kubetest: real node folder %s kept: still mounted there: %s\n", dir, strings.Join(mounts, " "))
		return
	}
	os.RemoveAll(dir)
}
