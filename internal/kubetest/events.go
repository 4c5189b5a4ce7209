package kubetest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// event records an Event on the pod from the kubelet, as
// `kubectl describe pod` and berth's get_server show them. Failures are
// only logged: events are best effort in a real kubelet too.
func (w *podWorker) event(ctx context.Context, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	pod := w.latest()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", pod.Name, time.Now().UnixNano()),
			Namespace: pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: "kubelet", Host: pod.Spec.NodeName},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubelet",
		ReportingInstance:   pod.Spec.NodeName,
	}
	if _, err := w.k.cfg.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		w.k.logf("pod %s/%s: event %s: %v", pod.Namespace, pod.Name, reason, err)
	}
}
