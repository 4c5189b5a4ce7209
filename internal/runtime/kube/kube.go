// Package kube runs each sandbox as a Kubernetes Pod through client-go:
// the runtime for deployments that outgrow one machine. A server is a Pod
// named after the server id in its client's namespace, with a Secret
// holding its agent token that the Pod owns (so they go together). The
// Pod's init container copies the static berth-agent from the agent image
// into a shared volume, and the sandbox container (any image with bash)
// runs it as its entrypoint, at the Kubernetes "restricted" pod security
// standard.
//
// State lives in the Kubernetes API: the runtime keeps nothing but
// informer caches, so any replica can serve any sandbox, and a replica
// that restarts finds every sandbox by its labels.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Pod networks: how berth reaches a sandbox's agent.
const (
	// PodNetworkDirect dials the pod IP: berth runs in the cluster.
	PodNetworkDirect = "direct"
	// PodNetworkAPIServer goes through the API server's pod proxy: berth
	// runs outside the cluster.
	PodNetworkAPIServer = "apiserver"
)

// Labels on everything the runtime creates.
const (
	labelName      = "app.kubernetes.io/name"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelServer    = "berth.dev/server"
	labelClient    = "berth.dev/client"
	labelOwner     = "berth.dev/owner"
	sandboxName    = "berth-sandbox"
	managedBy      = "berth"
)

// Options configure the Kubernetes runtime.
type Options struct {
	// Config reaches the API server as berth's identity.
	Config *rest.Config
	// Namespaces are the namespaces berth runs sandboxes in (its Role is
	// bound there); a client of another namespace is refused. Default:
	// "default".
	Namespaces []string
	// AgentImage holds the static berth-agent at /berth-agent.
	AgentImage string
	// PodNetwork is PodNetworkDirect (the default) or PodNetworkAPIServer.
	PodNetwork string
	// Defaults for each sandbox; a start request's resources override CPU
	// and memory.
	CPU, Memory   string // requests and limits, Kubernetes quantities
	WorkspaceSize string // the workspace emptyDir's size limit
	TmpSize       string // /tmp's
	RunAsUser     int64  // the fixed non-root uid (default 65532)
	PauseImage    string // node holders' image (default DefaultPauseImage)
	// ImageRegistry is where image builds push (registry.example/berth);
	// without it builds are refused. RegistrySecret names a
	// kubernetes.io/dockerconfigjson Secret in the build's namespace with
	// the credentials to push; KanikoImage is the executor (default
	// DefaultKanikoImage).
	ImageRegistry, RegistrySecret, KanikoImage string
	// ImagePullPolicy, when set, is every container's pull policy (the
	// tests, whose images are imported into the node, set IfNotPresent).
	// Unset, a sandbox's image by tag is Always, so that the kubelet asks
	// the registry at each start as the local runtime's cache does (a tag
	// that moved is followed on every runtime alike), and by digest
	// IfNotPresent (its content cannot change); the agent and pause images
	// are the operator's, IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// Egress, with Egress.Listen set, carries the sandboxes' network
	// through berth's egress gateway (see egress.go).
	Egress EgressOptions
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultCPU           = "1"
	DefaultMemory        = "2Gi"
	DefaultWorkspaceSize = "10Gi"
	DefaultTmpSize       = "1Gi"
	DefaultRunAsUser     = 65532
	agentPort            = 7070
	resyncPeriod         = 10 * time.Minute
)

// Runtime is the Kubernetes runtime. It is safe for concurrent use.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	client kubernetes.Interface
	// pods and events are informer-backed per namespace.
	pods     map[string]listerscorev1.PodLister
	factory  []informers.SharedInformerFactory
	stop     chan struct{}
	stopOnce sync.Once
	changes  *broadcast // pod changes, for WaitReady and Watch
	defaults defaults
	// indexers are the pod informers' caches, indexed by pod IP.
	indexers []cache.Indexer
	// egressCfg and front are the egress gateway's; nil without one.
	egressCfg *egressConfig
	front     *egressFront
}

// defaults are the parsed resource defaults.
type defaults struct {
	cpu, memory, workspace, tmp resource.Quantity
}

var (
	_ runtime.Runtime   = (*Runtime)(nil)
	_ runtime.Watcher   = (*Runtime)(nil)
	_ runtime.DiskSizer = (*Runtime)(nil)
)

// New connects to the API server, starts informers on the sandbox pods of
// every namespace and waits until their caches are filled.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Config == nil {
		return nil, errors.New("kubernetes runtime: no API server configuration")
	}
	if opts.AgentImage == "" {
		return nil, errors.New("kubernetes runtime: no agent image (--agent-image): an image holding the static berth-agent at /berth-agent")
	}
	if err := checkImage(opts.AgentImage); err != nil {
		return nil, fmt.Errorf("kubernetes runtime: --agent-image: %w", err)
	}
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{"default"}
	}
	for _, ns := range opts.Namespaces {
		if err := checkLabel("namespace", ns); err != nil {
			return nil, fmt.Errorf("kubernetes runtime: %w", err)
		}
	}
	switch opts.PodNetwork {
	case "":
		opts.PodNetwork = PodNetworkDirect
	case PodNetworkDirect, PodNetworkAPIServer:
	default:
		return nil, fmt.Errorf("kubernetes runtime: --pod-network %q: want %q or %q", opts.PodNetwork, PodNetworkDirect, PodNetworkAPIServer)
	}
	if opts.RunAsUser == 0 {
		opts.RunAsUser = DefaultRunAsUser
	}
	switch opts.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, fmt.Errorf("kubernetes runtime: image pull policy %q: want %s, %s or %s", opts.ImagePullPolicy,
			corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var d defaults
	for _, q := range []struct {
		name, value, def string
		into             *resource.Quantity
	}{
		{"cpu", opts.CPU, DefaultCPU, &d.cpu}, {"memory", opts.Memory, DefaultMemory, &d.memory},
		{"workspace size", opts.WorkspaceSize, DefaultWorkspaceSize, &d.workspace}, {"tmp size", opts.TmpSize, DefaultTmpSize, &d.tmp},
	} {
		v := q.value
		if v == "" {
			v = q.def
		}
		parsed, err := resource.ParseQuantity(v)
		if err != nil || parsed.Sign() <= 0 {
			return nil, fmt.Errorf("kubernetes runtime: %s %q: want a positive Kubernetes quantity", q.name, v)
		}
		*q.into = parsed
	}
	egressCfg, err := checkEgress(opts.Egress)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: %w", err)
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: %w", err)
	}
	r := &Runtime{
		opts: opts, log: opts.Logger, client: client, defaults: d, egressCfg: egressCfg,
		pods: map[string]listerscorev1.PodLister{}, stop: make(chan struct{}), changes: newBroadcast(),
	}
	selector := labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy, labelName: sandboxName}).String()
	var synced []cache.InformerSynced
	for _, ns := range opts.Namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
		inf := f.Core().V1().Pods()
		if _, err := inf.Informer().AddEventHandler(r.handler()); err != nil {
			return nil, fmt.Errorf("kubernetes runtime: %w", err)
		}
		if err := inf.Informer().AddIndexers(cache.Indexers{podIPIndex: podIPs}); err != nil {
			return nil, fmt.Errorf("kubernetes runtime: %w", err)
		}
		r.indexers = append(r.indexers, inf.Informer().GetIndexer())
		r.pods[ns] = inf.Lister()
		synced = append(synced, inf.Informer().HasSynced)
		r.factory = append(r.factory, f)
		f.Start(r.stop)
	}
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		r.Close()
		return nil, fmt.Errorf("kubernetes runtime: could not list sandbox pods in %s (check the API server and berth's Role there)", strings.Join(opts.Namespaces, ", "))
	}
	if egressCfg != nil {
		if r.front, err = listenEgress(r, egressCfg); err != nil {
			r.Close()
			return nil, fmt.Errorf("kubernetes runtime: %w", err)
		}
	}
	return r, nil
}

// Info implements runtime.Runtime.
func (r *Runtime) Info() runtime.Info {
	network := "its network reach is what the namespace's NetworkPolicies allow"
	if c := r.egressCfg; c != nil {
		network = fmt.Sprintf("its connections out go through berth's egress gateway at %s (proxy port %d, DNS port 53), which applies the server's network policy; "+
			"the namespace's NetworkPolicy, enforced by the cluster's network plugin, lets the pod reach nothing else", c.address, c.proxyPort)
	}
	return runtime.Info{
		Name:     "kubernetes",
		Confined: true,
		Isolation: fmt.Sprintf("kubernetes: each sandbox is a pod at the restricted pod security standard (non-root uid %d, no privilege escalation, "+
			"no capabilities, RuntimeDefault seccomp, read-only root filesystem, no service account token) in namespaces %s; "+
			"%s", r.opts.RunAsUser, strings.Join(r.opts.Namespaces, ", "), network),
		Features: []string{"sessions", "files", "reuse"},
	}
}

// OwnerID is the owner every Kubernetes runtime reports: its sandboxes
// are pods behind the API server, which every replica of a deployment
// reaches, so any replica acts on any of them.
const OwnerID = "kubernetes"

var _ runtime.Owned = (*Runtime)(nil)

// Owner implements runtime.Owned.
func (r *Runtime) Owner() runtime.Owner {
	return runtime.Owner{ID: OwnerID, Name: "the Kubernetes cluster (namespaces " + strings.Join(r.opts.Namespaces, ", ") + ")", Shared: true}
}

// SandboxDisk implements runtime.DiskSizer: the size limit of the
// workspace emptyDir (--pod-workspace-size), which the kubelet enforces
// by evicting the pod, so a user's disk quota counts the same as on the
// local runtime.
func (r *Runtime) SandboxDisk(runtime.Spec) int64 { return r.defaults.workspace.Value() }

// Close stops the egress gateway and the informers.
func (r *Runtime) Close() error {
	r.stopOnce.Do(func() {
		if r.front != nil {
			r.front.close()
		}
		close(r.stop)
		for _, f := range r.factory {
			f.Shutdown()
		}
	})
	return nil
}

// lister returns the pod lister of a namespace berth manages.
func (r *Runtime) lister(ns string) (listerscorev1.PodLister, error) {
	l, ok := r.pods[ns]
	if !ok {
		return nil, fmt.Errorf("namespace %q is not one berth runs sandboxes in (%s); add it to --kube-namespaces and bind berth's Role there", ns, strings.Join(r.opts.Namespaces, ", "))
	}
	return l, nil
}

// find returns the sandbox pod of a server, in whichever namespace berth
// manages holds it.
func (r *Runtime) find(id string) (*corev1.Pod, bool) {
	for _, ns := range r.opts.Namespaces {
		if p, err := r.pods[ns].Pods(ns).Get(id); err == nil {
			return p, true
		}
	}
	return nil, false
}

// namespaces says which namespaces berth manages, sorted.
func (r *Runtime) namespaces() []string {
	ns := slices.Clone(r.opts.Namespaces)
	slices.Sort(ns)
	return ns
}
