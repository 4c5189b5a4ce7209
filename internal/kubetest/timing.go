package kubetest

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodTiming is when the kubelet did its part for one pod, so a benchmark
// can take the stand-in's own time out of a start: Started minus Seen is
// what this kubelet took to set the pod up and start its processes, time
// a real node would spend differently (pulling, sandboxing).
type PodTiming struct {
	// Seen is when the kubelet first saw the pod bound to its Node.
	Seen time.Time
	// Started is when the last of the pod's containers (after its init
	// containers) first had its process running.
	Started time.Time
	// Ready is when the kubelet first reported the pod Ready.
	Ready time.Time
}

// Timing returns the times of the pod with that UID; ok is false for a
// pod this kubelet never saw. Times not reached yet are zero.
func (k *Kubelet) Timing(uid types.UID) (t PodTiming, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok = k.timings[uid]
	return t, ok
}

// noteTiming updates the pod's times with fn.
func (k *Kubelet) noteTiming(uid types.UID, fn func(*PodTiming)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.timings[uid]
	fn(&t)
	k.timings[uid] = t
}
