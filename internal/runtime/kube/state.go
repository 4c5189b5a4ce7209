package kube

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-mcp/berth/internal/runtime"
)

// waitingFailures are the waiting reasons after which a sandbox will not
// become ready without help: the kubelet may retry some of them for ever,
// but a caller waiting for its sandbox wants the reason now.
var waitingFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true, "RunContainerError": true,
}

// stateOf reads a sandbox's state off its pod, with the endpoint for the
// pod network berth uses.
func (r *Runtime) stateOf(p *corev1.Pod) runtime.Status {
	st := stateOf(p)
	if st.State == runtime.StateReady && r.opts.PodNetwork == PodNetworkAPIServer {
		st.Endpoint = proxyEndpoint(p.Namespace, p.Name)
	}
	return st
}

// stateOf reads a sandbox's state off its pod, reached by its IP.
func stateOf(p *corev1.Pod) runtime.Status {
	if p.DeletionTimestamp != nil {
		return runtime.Status{State: runtime.StateFailed, Message: "its pod is being deleted"}
	}
	if msg := failure(p); msg != "" {
		return runtime.Status{State: runtime.StateFailed, Message: msg}
	}
	if p.Status.PodIP != "" && podReady(p) {
		return runtime.Status{State: runtime.StateReady, Endpoint: endpointOf(p)}
	}
	return runtime.Status{State: runtime.StatePending, Message: pendingReason(p)}
}

func endpointOf(p *corev1.Pod) runtime.Endpoint {
	return runtime.Endpoint{Network: "tcp", Address: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(agentPort))}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failure says why a pod will not serve, or "".
func failure(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		// The kubelet's own reason comes first: an evicted pod's
		// containers were only killed.
		if p.Status.Reason == "Evicted" {
			return "its pod was evicted: " + strings.TrimSpace(p.Status.Message)
		}
		if msg := terminated(p.Status.ContainerStatuses); msg != "" {
			return msg
		}
		if msg := terminated(p.Status.InitContainerStatuses); msg != "" {
			return msg
		}
		return fmt.Sprintf("its pod %s: %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	for _, group := range []struct {
		kind     string
		statuses []corev1.ContainerStatus
	}{{"init container", p.Status.InitContainerStatuses}, {"container", p.Status.ContainerStatuses}} {
		for _, cs := range group.statuses {
			if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
				return fmt.Sprintf("%s %s (image %s): %s: %s", group.kind, cs.Name, cs.Image, w.Reason, w.Message)
			}
			// The sandbox container ending at all is a failure; an init
			// container only when it fails. One that ended cleanly was
			// stopped (the agent exits 0 only on SIGTERM): by an eviction,
			// say, whose reason the kubelet gives once the pod is
			// terminal, a moment later. Until then the pod is stopping.
			if t := cs.State.Terminated; t != nil && (group.kind == "container" && !stopping(t) || t.ExitCode != 0) {
				return describeTerminated(cs.Name, t)
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "its pod cannot be scheduled: " + c.Message
		}
	}
	return ""
}

// stopping says whether a container ended cleanly, which a pod not yet
// terminal reports before the kubelet's reason for stopping it.
func stopping(t *corev1.ContainerStateTerminated) bool {
	return t.ExitCode == 0 && t.Reason != "OOMKilled"
}

func terminated(statuses []corev1.ContainerStatus) string {
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || t.Reason == "OOMKilled") {
			return describeTerminated(cs.Name, t)
		}
	}
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil {
			return describeTerminated(cs.Name, t)
		}
	}
	return ""
}

func describeTerminated(name string, t *corev1.ContainerStateTerminated) string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s ended", name)
	if t.Reason == "OOMKilled" {
		b.WriteString(": OOMKilled (it exceeded its memory limit)")
	} else if t.Reason != "" {
		fmt.Fprintf(&b, ": %s", t.Reason)
	}
	switch {
	case t.Signal != 0:
		fmt.Fprintf(&b, ", signal %d", t.Signal)
	case t.ExitCode > 128 && t.ExitCode <= 128+64:
		// A kubelet reports a process killed by a signal as 128 plus
		// the signal's number (CRI has no signal field).
		fmt.Fprintf(&b, ", exit code %d (killed by signal %d)", t.ExitCode, t.ExitCode-128)
	default:
		fmt.Fprintf(&b, ", exit code %d", t.ExitCode)
	}
	if t.Message != "" {
		fmt.Fprintf(&b, ": %s", strings.TrimSpace(t.Message))
	}
	return b.String()
}

// pendingReason says what a pod not yet ready waits for.
func pendingReason(p *corev1.Pod) string {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return fmt.Sprintf("container %s: %s", cs.Name, w.Reason)
			}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return fmt.Sprintf("container %s stopped; the kubelet is stopping its pod", cs.Name)
		}
	}
	if p.Spec.NodeName == "" {
		return "waiting to be scheduled"
	}
	return "agent not answering yet"
}
