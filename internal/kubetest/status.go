package kubetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusLoop writes the pod's status whenever it changed, coalescing
// changes that come faster than writes, until ctx ends.
func (w *podWorker) statusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.dirty:
			w.writeStatus(ctx)
		}
	}
}

// writeStatus puts the kubelet's view of the pod into pods/status,
// keeping what others own there (PodScheduled, qosClass, other
// conditions). A conflict means a newer pod: read it and write again.
func (w *podWorker) writeStatus(ctx context.Context) {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	pods := w.k.cfg.client.CoreV1().Pods(w.namespace)
	pod := w.latest()
	for try := range 5 {
		if pod.UID != w.uid {
			return // a new pod took the name: ours is gone
		}
		next := pod.DeepCopy()
		w.mu.Lock()
		w.fillStatus(&next.Status, pod)
		w.mu.Unlock()
		if podReady(&next.Status) {
			// Noted before the write: a watcher may see it before
			// UpdateStatus returns here.
			now := time.Now()
			w.k.noteTiming(w.uid, func(t *PodTiming) {
				if t.Ready.IsZero() {
					t.Ready = now
				}
			})
		}
		_, err := pods.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if !apierrors.IsConflict(err) {
			// A loaded API server may time out: nothing else would bring
			// this status again, so try again shortly.
			w.k.logf("pod %s/%s: write status (try %d): %v", w.namespace, w.name, try+1, err)
			t := time.NewTimer(time.Duration(try+1) * 200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if pod, err = pods.Get(ctx, w.name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) || ctx.Err() != nil {
				return
			}
			pod = w.latest()
		}
	}
	w.k.logf("pod %s/%s: status not written after 5 tries", w.namespace, w.name)
}

// fillStatus writes the kubelet-owned fields of st. Call with w.mu held.
func (w *podWorker) fillStatus(st *corev1.PodStatus, pod *corev1.Pod) {
	st.HostIP = nodeIP
	st.HostIPs = []corev1.HostIP{{IP: nodeIP}}
	if w.ip != "" {
		st.PodIP = w.ip
		st.PodIPs = []corev1.PodIP{{IP: w.ip}}
	}
	st.StartTime = w.startTime
	st.Reason, st.Message = w.reason, w.msg
	st.InitContainerStatuses = statuses(w.initCs)
	st.ContainerStatuses = statuses(w.cs)
	st.Phase = w.phaseNow()
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed

	var notInit, notReady []string
	for _, c := range w.initCs {
		if t := c.status.State.Terminated; t == nil || t.ExitCode != 0 {
			notInit = append(notInit, c.spec.Name)
		}
	}
	for _, c := range w.cs {
		if !c.status.Ready {
			notReady = append(notReady, c.spec.Name)
		}
	}
	w.setCond(st, corev1.PodReadyToStartContainers, w.setUp && !terminal, "", "")
	if w.initialized || len(notInit) == 0 {
		w.setCond(st, corev1.PodInitialized, true, reasonIf(terminal && len(w.initCs) > 0, "PodCompleted"), "")
	} else {
		w.setCond(st, corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " ")))
	}
	ready := len(notReady) == 0 && !terminal
	reason, msg := "", ""
	switch {
	case terminal:
		reason = "PodCompleted"
	case !ready:
		reason, msg = "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	}
	w.setCond(st, corev1.ContainersReady, ready, reason, msg)
	// Readiness gates are conditions others set; Ready needs them too.
	for _, g := range pod.Spec.ReadinessGates {
		if !hasTrueCond(st, g.ConditionType) && ready {
			ready, reason, msg = false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
	}
	w.setCond(st, corev1.PodReady, ready, reason, msg)
}

// phaseNow is the pod phase: terminal once decided, Running once a
// container has started after init, Pending before.
func (w *podWorker) phaseNow() corev1.PodPhase {
	if w.phase != "" {
		return w.phase
	}
	if w.initialized {
		for _, c := range w.cs {
			if c.status.State.Waiting == nil || c.status.RestartCount > 0 || c.status.LastTerminationState.Terminated != nil {
				return corev1.PodRunning
			}
		}
	}
	return corev1.PodPending
}

// setCond sets condition t in st, keeping its transition time while its
// status stays the same.
func (w *podWorker) setCond(st *corev1.PodStatus, t corev1.PodConditionType, ok bool, reason, msg string) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	prev, seen := w.conds[t]
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
	if seen && prev.Status == status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	w.conds[t] = c
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
	sort.SliceStable(st.Conditions, func(i, j int) bool { return condOrder(st.Conditions[i].Type) < condOrder(st.Conditions[j].Type) })
}

func condOrder(t corev1.PodConditionType) int {
	switch t {
	case corev1.PodReadyToStartContainers:
		return 0
	case corev1.PodInitialized:
		return 1
	case corev1.PodReady:
		return 2
	case corev1.ContainersReady:
		return 3
	case corev1.PodScheduled:
		return 4
	}
	return 5
}

func podReady(st *corev1.PodStatus) bool { return hasTrueCond(st, corev1.PodReady) }

func hasTrueCond(st *corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func statuses(cs []*container) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, c := range cs {
		out[i] = *c.status.DeepCopy()
	}
	return out
}

func reasonIf(b bool, r string) string {
	if b {
		return r
	}
	return ""
}
