package kubetest

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const (
	nodeIP      = "127.0.0.1"
	kubeVersion = "v1.37.2"
)

// Kubelet is the harness's stand-in for the kubelet, for tests that need
// several Nodes or hundreds of pods, and for machines where a real node
// cannot start (see RealNode). It registers Nodes (Ready, with
// kubernetes.io/hostname labels, capacity and heartbeat Leases, so the
// real scheduler places pods by affinity and resources), watches the pods
// bound to them through an informer and runs each pod's init containers,
// then its containers, as local processes, writing pod status back as a
// kubelet does: phase, conditions, podIP, container states, restart
// counts, events.
//
// What it honours: command and args (with $(VAR) expansion), env (values,
// valueFrom secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef),
// envFrom, workingDir, emptyDir (sizeLimit enforced by eviction), Secret,
// ConfigMap, downwardAPI and projected volumes (ServiceAccount tokens
// through TokenRequest), subPath mounts, readiness probes (httpGet,
// tcpSocket, exec), restartPolicy with back-off and CrashLoopBackOff,
// image pull failures (ErrImagePull, ImagePullBackOff) for images marked
// missing, deletion with the grace period (SIGTERM to the container's
// process group, SIGKILL when it is over, then the pod deleted with grace
// 0), terminationMessagePolicy FallbackToLogsOnError, and container logs
// served to kube-apiserver for pods/log (previous, tailLines, limitBytes,
// follow).
//
// Images: an image registered with AddImage lends its files (by rewriting)
// and entrypoint; one marked with MissingImage cannot be pulled; one whose
// name contains Options.KanikoImage is a Kaniko build that only records
// what it was asked (KanikoRuns) and exits (SetKanikoExit); .../pause runs
// `sleep infinity`; any other image runs its command on the host as is.
// Processes get PATH from the host, HOME in a folder of their own, and
// KUBERNETES_SERVICE_HOST/PORT pointing at kube-apiserver. Each container
// attempt is a process group that ends with its main process, with the
// pod, and with the test, even one that dies without cleaning up (see
// janitor.go).
//
// What it cannot: isolation. Processes share the host's filesystem,
// network namespace and user (securityContext, CPU limits, readOnly
// mounts and liveness probes are ignored). limits.memory is enforced,
// with OOMKilled reported, only where the test may make memory cgroups
// (as root; see memory.go): MemoryLimitsEnforced says.
// Each pod gets its own loopback address 127.0.0.N as podIP, but a process
// binding 0.0.0.0 binds it on every pod's address: bind the pod IP
// (fieldRef status.podIP). Mount paths exist only by rewriting: every
// volumeMount.mountPath, and every path of the image's Files, is replaced
// by its host folder where it appears in command, args, env values and
// workingDir (as a whole path or a path prefix); a path a program computes
// or reads from a file is not rewritten, so in-cluster client config,
// which reads the fixed /var/run/secrets path, does not work in a pod.
// Processes run as the test's user. exec, attach and port-forward are not
// served, and kube-apiserver's pod proxy refuses loopback pod IPs
// ("address not allowed"): reach pods at their pod IP directly.
type Kubelet struct {
	cfg    kubeletConfig
	nodes  []string
	images images
	ips    *ipPool
	logs   *logServer
	kaniko kanikoRecorder
	mem    *memCgroups // nil where memory limits cannot be enforced
	// janitor kills container processes left if the test binary dies.
	janitor *janitor
	log     *log.Logger
	logf_   *os.File

	ctx    context.Context // ends with stop: every goroutine below
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// finished holds pods whose worker is done: later events for them
	// (a Job's finalizer going) must not start them again.
	finished map[types.UID]bool
	timings  map[types.UID]PodTiming
}

// kubeletConfig is what Env hands the kubelet.
type kubeletConfig struct {
	client              kubernetes.Interface
	dir, logPath        string
	nodes               int
	capacity            corev1.ResourceList
	pki                 *pki
	apiPort             int
	kanikoImage         string
	backoff, maxBackoff time.Duration
}

// startKubelet registers the Nodes and starts running their pods until
// runCtx ends or stop is called; startCtx bounds the registration.
func startKubelet(runCtx, startCtx context.Context, cfg kubeletConfig) (k *Kubelet, err error) {
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("kubelet dir: %w", err)
	}
	lf, err := os.OpenFile(cfg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubelet log: %w", err)
	}
	ctx, cancel := context.WithCancel(runCtx)
	k = &Kubelet{
		cfg:      cfg,
		images:   images{known: map[string]Image{}, missing: map[string]bool{}, kaniko: cfg.kanikoImage},
		ips:      newIPPool(),
		log:      log.New(lf, "", log.LstdFlags|log.Lmicroseconds),
		logf_:    lf,
		ctx:      ctx,
		cancel:   cancel,
		workers:  map[types.UID]*podWorker{},
		finished: map[types.UID]bool{},
		timings:  map[types.UID]PodTiming{},
	}
	defer func() {
		if err != nil {
			k.stop()
		}
	}()
	if k.janitor, err = startJanitor(cfg.dir); err != nil {
		return nil, err
	}
	k.mem = findMemCgroups("kubetest-" + randomToken()[:12])
	for i := range cfg.nodes {
		k.nodes = append(k.nodes, fmt.Sprintf("kubetest-node-%d", i+1))
	}
	if k.logs, err = startLogServer(k); err != nil {
		return nil, err
	}
	for _, n := range k.nodes {
		if err := k.registerNode(startCtx, n); err != nil {
			return nil, err
		}
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.heartbeat(ctx)
	}()

	factory := informers.NewSharedInformerFactory(cfg.client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podChanged(obj) },
		UpdateFunc: func(_, obj any) { k.podChanged(obj) },
		DeleteFunc: func(obj any) { k.podRemoved(obj) },
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	factory.Start(ctx.Done())
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(startCtx.Done(), pods.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync: %w", startCtx.Err())
	}
	if err := waitNodesSchedulable(startCtx, cfg.client, k.nodes, func() error { return nil }); err != nil {
		return nil, err
	}
	return k, nil
}

// Nodes returns the names of the Nodes this kubelet runs.
func (k *Kubelet) Nodes() []string { return append([]string(nil), k.nodes...) }

// AddImage registers an image: a container using the reference name
// (compared as written in the pod spec) sees img's files at their
// in-image paths (by rewriting, see Kubelet) and runs its entrypoint when
// the pod gives no command. It clears a MissingImage mark.
func (k *Kubelet) AddImage(name string, img Image) { k.images.add(name, img) }

// MissingImage makes pulls of the reference name fail: the container
// waits with reason ErrImagePull, then ImagePullBackOff, and the pod's
// events say so, as with a real kubelet and a registry that lacks it.
func (k *Kubelet) MissingImage(name string) { k.images.setMissing(name) }

// MemoryLimitsEnforced says whether containers' limits.memory is enforced
// here (and OOMKilled reported): it needs memory cgroups the test may
// make, so root on Linux.
func (k *Kubelet) MemoryLimitsEnforced() bool { return k.mem != nil }

// stop kills every container process and ends the kubelet's goroutines.
func (k *Kubelet) stop() {
	k.cancel()
	k.wg.Wait()
	if k.logs != nil {
		k.logs.close()
	}
	k.mem.close()
	if k.janitor != nil {
		k.janitor.close()
	}
	k.logf_.Close()
}

func (k *Kubelet) logf(format string, args ...any) { k.log.Printf(format, args...) }

// ours says whether the pod is bound to one of this kubelet's Nodes.
func (k *Kubelet) ours(pod *corev1.Pod) bool {
	for _, n := range k.nodes {
		if pod.Spec.NodeName == n {
			return true
		}
	}
	return false
}

// podChanged hands the pod's latest version to its worker, starting one
// for a pod newly bound here. It runs on the informer's goroutine and
// never blocks.
func (k *Kubelet) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !k.ours(pod) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx.Err() != nil {
		return
	}
	if w := k.workers[pod.UID]; w != nil {
		w.update(pod)
		return
	}
	if k.finished[pod.UID] {
		return
	}
	w := newPodWorker(k, pod)
	k.workers[pod.UID] = w
	k.timings[pod.UID] = PodTiming{Seen: time.Now()}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		w.run(k.ctx)
		k.mu.Lock()
		delete(k.workers, pod.UID)
		k.finished[pod.UID] = true
		k.mu.Unlock()
	}()
}

// podRemoved kills what is left of a pod that is gone from the API (a
// force deletion, or the end of a graceful one).
func (k *Kubelet) podRemoved(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.removed()
	}
}

// worker finds the pod namespace/name, for the log server. A pod being
// deleted may share its name with its successor: the successor wins.
func (k *Kubelet) worker(namespace, name string) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	var found *podWorker
	for _, w := range k.workers {
		if w.namespace == namespace && w.name == name {
			if !w.stoppingNow() {
				return w
			}
			found = w
		}
	}
	return found
}

// quantity returns the node capacity of name, for resourceFieldRef.
func (k *Kubelet) quantity(name corev1.ResourceName) resource.Quantity {
	return k.cfg.capacity[name]
}
