package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWorker runs one pod from its binding to its removal: it sets up the
// pod's address and volumes, runs its init containers one after another,
// supervises its containers, and on deletion stops them within the grace
// period and finalizes the pod. It owns the pod's processes, files and
// status writes.
type podWorker struct {
	k               *Kubelet
	uid             types.UID
	namespace, name string
	dir             string // pod's files: volumes, container homes, logs

	changed chan struct{} // a newer pod version is in pod (cap 1)
	dirty   chan struct{} // status needs writing (cap 1)
	// stopping is closed when the containers must stop (deletion or
	// eviction); gone when the pod left the API and no grace is left.
	stopping, gone chan struct{}

	mu          sync.Mutex
	pod         *corev1.Pod // latest version seen
	grace       time.Duration
	deleting    bool // stopping because the pod is being deleted
	isGone      bool
	ip          string
	startTime   *metav1.Time
	setUp       bool // address and volumes ready
	initialized bool
	phase       corev1.PodPhase // terminal phase once decided; "" before
	reason, msg string          // pod status reason and message (Evicted)
	initCs, cs  []*container
	volumes     map[string]string // volume name -> host folder
	conds       map[corev1.PodConditionType]corev1.PodCondition
	writeMu     sync.Mutex     // one status write at a time
	bg          sync.WaitGroup // the pod's helpers (eviction watch); run waits for them
}

func newPodWorker(k *Kubelet, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		k:         k,
		uid:       pod.UID,
		namespace: pod.Namespace,
		name:      pod.Name,
		dir:       filepath.Join(k.cfg.dir, "pods", string(pod.UID)),
		changed:   make(chan struct{}, 1),
		dirty:     make(chan struct{}, 1),
		stopping:  make(chan struct{}),
		gone:      make(chan struct{}),
		pod:       pod,
		volumes:   map[string]string{},
		conds:     map[corev1.PodConditionType]corev1.PodCondition{},
	}
	for _, c := range pod.Spec.InitContainers {
		w.initCs = append(w.initCs, newContainer(w, c, true))
	}
	for _, c := range pod.Spec.Containers {
		w.cs = append(w.cs, newContainer(w, c, false))
	}
	w.noteDeletion(pod)
	return w
}

// update records a newer version of the pod. It never blocks.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.noteDeletion(pod)
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// noteDeletion starts stopping the containers when the pod is being
// deleted, with the grace period the API server set.
func (w *podWorker) noteDeletion(pod *corev1.Pod) {
	if pod.DeletionTimestamp == nil {
		return
	}
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	w.stop(grace, true, "", "")
}

// stop closes stopping once; deleting says whether the pod is to be
// finalized afterwards, reason and msg are the pod's status (eviction).
func (w *podWorker) stop(grace time.Duration, deleting bool, reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleting {
		w.deleting = true
	}
	select {
	case <-w.stopping:
		return
	default:
	}
	w.grace = grace
	if reason != "" {
		w.phase, w.reason, w.msg = corev1.PodFailed, reason, msg
	}
	close(w.stopping)
}

// removed is called when the pod is gone from the API.
func (w *podWorker) removed() {
	w.stop(0, true, "", "")
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.isGone {
		w.isGone = true
		close(w.gone)
	}
}

// markDirty asks the status writer for a write.
func (w *podWorker) markDirty() {
	select {
	case w.dirty <- struct{}{}:
	default:
	}
}

// latest returns the newest pod version seen.
func (w *podWorker) latest() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) stoppingNow() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

// sleep waits d; false when the pod's containers must stop meanwhile.
func (w *podWorker) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}

// run is the pod's whole life on this kubelet; it returns when the pod is
// finalized or the kubelet stops, with every process of the pod ended.
func (w *podWorker) run(ctx context.Context) {
	defer w.cleanup()
	statusCtx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		w.statusLoop(statusCtx)
	}()
	defer func() { stopStatus(); <-statusDone }()

	if p := w.latest(); p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		// Finished before this kubelet saw it (it never runs a pod twice):
		// only its deletion is left to do.
		w.mu.Lock()
		w.phase = p.Status.Phase
		w.mu.Unlock()
	} else {
		podCtx, cancelPod := context.WithCancel(ctx)
		defer func() { cancelPod(); w.bg.Wait() }()
		w.runPod(podCtx)
	}
	if ctx.Err() != nil {
		return // the kubelet stops: the test is over, leave the API alone
	}
	// Terminal, or stopped for deletion or eviction: say so.
	stopStatus()
	<-statusDone
	w.mu.Lock()
	if w.phase == "" {
		w.phase = w.finalPhase()
	}
	w.mu.Unlock()
	w.writeStatus(ctx)
	// A finished (or evicted) pod stays, for Jobs and tests to read, until
	// it is deleted.
	stopping := w.stopping
	for {
		w.mu.Lock()
		deleting := w.deleting
		w.mu.Unlock()
		if deleting {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-stopping:
			stopping = nil // closed for good: once is enough
		case <-w.changed:
		}
	}
	w.finalize(ctx)
}

// runPod sets the pod up and runs its containers until they are done for
// good or must stop.
func (w *podWorker) runPod(ctx context.Context) {
	if err := w.setup(ctx); err != nil {
		return // stopping, or the kubelet is
	}
	policy := w.latest().Spec.RestartPolicy
	initPolicy := policy
	if initPolicy == corev1.RestartPolicyAlways {
		initPolicy = corev1.RestartPolicyOnFailure // init containers re-run only on failure
	}
	for _, c := range w.initCs {
		if ok := c.supervise(ctx, initPolicy); !ok {
			if !w.stoppingNow() && ctx.Err() == nil {
				w.mu.Lock()
				w.phase = corev1.PodFailed
				w.mu.Unlock()
			}
			return
		}
	}
	w.mu.Lock()
	w.initialized = true
	w.mu.Unlock()
	w.markDirty()
	var wg sync.WaitGroup
	for _, c := range w.cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.supervise(ctx, policy)
		}()
	}
	wg.Wait()
}

// setup gives the pod its address and volumes, retrying volumes that
// cannot be made yet (a Secret not created yet) as a kubelet does.
func (w *podWorker) setup(ctx context.Context) error {
	ip, err := w.k.ips.get()
	if err != nil {
		return err
	}
	now := metav1.Now()
	w.mu.Lock()
	w.ip, w.startTime = ip, &now
	w.mu.Unlock()
	w.markDirty()
	backoff := w.k.cfg.backoff
	for {
		err := w.setupVolumes(ctx)
		if err == nil {
			break
		}
		w.k.logf("pod %s/%s: %v", w.namespace, w.name, err)
		w.event(ctx, corev1.EventTypeWarning, "FailedMount", err.Error())
		if !w.sleep(ctx, backoff) {
			return fmt.Errorf("pod %s/%s stopped before its volumes were set up", w.namespace, w.name)
		}
		backoff = min(2*backoff, w.k.cfg.maxBackoff)
	}
	w.mu.Lock()
	w.setUp = true
	w.mu.Unlock()
	w.markDirty()
	w.startEvictionWatch(ctx)
	return nil
}

// allStarted says whether every container has had a process running.
// Call with w.mu held.
func (w *podWorker) allStarted() bool {
	for _, c := range w.cs {
		if c.status.ContainerID == "" {
			return false
		}
	}
	return true
}

// finalPhase is the terminal phase of a pod whose containers all ended:
// Succeeded when each last exited 0, else Failed. Call with w.mu held.
func (w *podWorker) finalPhase() corev1.PodPhase {
	if !w.initialized {
		return corev1.PodFailed
	}
	for _, c := range w.cs {
		t := c.status.State.Terminated
		if t == nil || t.ExitCode != 0 {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

// finalize deletes the pod with grace 0: its containers are stopped, so
// the API server may drop it (once other finalizers, such as a Job's,
// are gone).
func (w *podWorker) finalize(ctx context.Context) {
	zero := int64(0)
	uid := w.uid
	err := w.k.cfg.client.CoreV1().Pods(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.k.logf("pod %s/%s: finalize: %v", w.namespace, w.name, err)
	}
}

// cleanup frees the pod's address and files.
func (w *podWorker) cleanup() {
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if ip != "" {
		w.k.ips.put(ip)
	}
	if err := os.RemoveAll(w.dir); err != nil {
		w.k.logf("pod %s/%s: remove files: %v", w.namespace, w.name, err)
	}
}
