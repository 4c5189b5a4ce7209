package kubetest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// container is one container of a pod: its spec, its status as the
// kubelet reports it, its logs, and the process of its current attempt.
type container struct {
	w    *podWorker
	spec corev1.Container
	init bool
	logs *containerLogs
	// status is guarded by w.mu.
	status corev1.ContainerStatus
}

func newContainer(w *podWorker, spec corev1.Container, init bool) *container {
	waiting := "ContainerCreating"
	if init || len(w.pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	return &container{
		w:    w,
		spec: spec,
		init: init,
		logs: newContainerLogs(w.dir, spec.Name),
		status: corev1.ContainerStatus{
			Name:  spec.Name,
			Image: spec.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		},
	}
}

// supervise runs the container until it is done for good under policy,
// restarting it with back-off as a kubelet does. It reports whether the
// last attempt exited 0; false also when the pod stops meanwhile.
func (c *container) supervise(ctx context.Context, policy corev1.RestartPolicy) bool {
	cfg := c.w.k.cfg
	backoff := cfg.backoff
	attempts := 0
	for {
		if c.w.stoppingNow() || !c.pull(ctx) {
			return false // nothing starts in a pod that is stopping
		}
		started := time.Now()
		code, stopped := c.runOnce(ctx, attempts)
		attempts++
		if stopped {
			return code == 0
		}
		if policy == corev1.RestartPolicyNever || (code == 0 && (c.init || policy == corev1.RestartPolicyOnFailure)) {
			return code == 0
		}
		// A container that ran long enough is forgiven its earlier crashes.
		if time.Since(started) > 2*cfg.maxBackoff {
			backoff = cfg.backoff
		}
		// Like a kubelet: restart once at once, then back off.
		if attempts > 1 {
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff, c.spec.Name, c.w.name, c.w.namespace, c.w.uid)
			c.setWaiting("CrashLoopBackOff", msg)
			c.w.event(ctx, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+c.spec.Name+" in pod "+c.w.name+"_"+c.w.namespace)
			if !c.w.sleep(ctx, backoff) {
				return false
			}
			backoff = min(2*backoff, cfg.maxBackoff)
		}
	}
}

// pull makes sure the image is there: a missing one waits with
// ErrImagePull, then ImagePullBackOff, and is tried again after a
// back-off. It returns false when the pod stops first.
func (c *container) pull(ctx context.Context) bool {
	backoff := c.w.k.cfg.backoff
	for {
		kind, _ := c.w.k.images.resolve(c.spec.Image)
		if kind != imageMissing {
			return true
		}
		msg := fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: %q: not found (kubetest: image marked missing)", c.spec.Image, c.spec.Image, c.spec.Image)
		c.setWaiting("ErrImagePull", msg)
		c.w.event(ctx, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", c.spec.Image, msg))
		c.w.event(ctx, corev1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		if !c.w.sleep(ctx, backoff) {
			return false
		}
		c.setWaiting("ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", c.spec.Image, msg))
		c.w.event(ctx, corev1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.spec.Image))
		c.w.event(ctx, corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		if !c.w.sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, c.w.k.cfg.maxBackoff)
	}
}

// runOnce runs one attempt of the container and returns its exit code,
// and whether it ended because the pod stops (or the kubelet does).
func (c *container) runOnce(ctx context.Context, attempt int) (code int, stopped bool) {
	w := c.w
	w.mu.Lock()
	if attempt > 0 {
		if c.status.State.Terminated != nil {
			c.status.LastTerminationState = c.status.State
		}
		c.status.RestartCount++
	}
	restarts := c.status.RestartCount
	w.mu.Unlock()
	p, err := c.start(ctx, int(restarts))
	backoff := w.k.cfg.backoff
	var cfgErr *configError
	for errors.As(err, &cfgErr) {
		c.setWaiting("CreateContainerConfigError", err.Error())
		w.event(ctx, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		if !w.sleep(ctx, backoff) {
			return 1, true
		}
		backoff = min(2*backoff, w.k.cfg.maxBackoff)
		p, err = c.start(ctx, int(restarts))
	}
	if err != nil {
		now := metav1.Now()
		w.mu.Lock()
		c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now,
		}}
		c.status.Ready, c.status.Started = false, ptr(false)
		w.mu.Unlock()
		w.markDirty()
		w.event(ctx, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return 128, w.stoppingNow() || ctx.Err() != nil
	}
	startedAt := metav1.Now()
	w.mu.Lock()
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}}
	c.status.ContainerID = p.id()
	c.status.ImageID = "kubetest://" + c.spec.Image
	c.status.Started = ptr(true)
	// Without a readiness probe a running container is ready.
	c.status.Ready = c.spec.ReadinessProbe == nil && !c.init
	allStarted := !c.init && attempt == 0 && w.allStarted()
	w.mu.Unlock()
	if allStarted { // before the status write that may make the pod Ready
		now := time.Now()
		w.k.noteTiming(w.uid, func(t *PodTiming) { t.Started = now })
	}
	w.markDirty()
	w.event(ctx, corev1.EventTypeNormal, "Created", "Created container: "+c.spec.Name)
	w.event(ctx, corev1.EventTypeNormal, "Started", "Started container "+c.spec.Name)

	probeCtx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		if c.spec.ReadinessProbe != nil && !c.init {
			c.probeReadiness(probeCtx)
		}
	}()
	select {
	case <-p.done():
	case <-w.stopping:
		stopped = true
		w.event(ctx, corev1.EventTypeNormal, "Killing", "Stopping container "+c.spec.Name)
		w.mu.Lock()
		grace := w.grace
		w.mu.Unlock()
		c.kill(ctx, p, grace)
	case <-ctx.Done():
		stopped = true
		p.signal(syscall.SIGKILL)
		<-p.done()
	}
	stopProbe()
	<-probeDone
	code = p.exitCode()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	if p.oomKilled() {
		reason = "OOMKilled"
	}
	msg := ""
	if code != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = c.logs.lastWords(int(restarts))
	}
	w.mu.Lock()
	c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: msg, StartedAt: startedAt, FinishedAt: metav1.Now(), ContainerID: p.id(),
	}}
	c.status.Ready, c.status.Started = false, ptr(false)
	w.mu.Unlock()
	w.markDirty()
	return code, stopped || ctx.Err() != nil
}

// kill stops the process group: SIGTERM, then SIGKILL when grace is over
// or the pod is gone from the API.
func (c *container) kill(ctx context.Context, p proc, grace time.Duration) {
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done():
	case <-t.C:
	case <-c.w.gone:
	case <-ctx.Done():
	}
	p.signal(syscall.SIGKILL) // also what the main process left in its group
	<-p.done()
}

// setWaiting records a waiting state (a pull failure, a back-off).
func (c *container) setWaiting(reason, msg string) {
	c.w.mu.Lock()
	if t := c.status.State.Terminated; t != nil {
		c.status.LastTerminationState = c.status.State
	}
	c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.status.Ready = false
	c.w.mu.Unlock()
	c.w.markDirty()
}

func ptr[T any](v T) *T { return &v }
