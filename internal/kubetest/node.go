package kubetest

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// leaseDuration and leaseRenew are a real kubelet's defaults: the node
// lifecycle controller marks a Node unknown when its Lease is not renewed.
const (
	leaseDuration = 40 * time.Second
	leaseRenew    = 10 * time.Second
)

// registerNode creates (or takes over) the Node name with a Ready status,
// its kubernetes.io/hostname label and capacity, and its Lease.
func (k *Kubelet) registerNode(ctx context.Context, name string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
			},
		},
	}
	nodes := k.cfg.client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	status := corev1.NodeStatus{
		Capacity:    k.cfg.capacity.DeepCopy(),
		Allocatable: k.cfg.capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubetest process kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP},
			{Type: corev1.NodeHostName, Address: name},
		},
		// kube-apiserver reaches the kubelet here for pods/log.
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.logs.port)}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          kubeVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
			ContainerRuntimeVersion: "kubetest://process",
			OSImage:                 "kubetest process kubelet",
		},
	}
	// The node lifecycle controller may write the new Node meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = status
		_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return k.renewLease(ctx, name)
}

// renewLease creates or renews the Node's heartbeat Lease.
func (k *Kubelet) renewLease(ctx context.Context, name string) error {
	leases := k.cfg.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(leaseDuration / time.Second)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &secs, RenewTime: &now},
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create lease of node %s: %w", name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get lease of node %s: %w", name, err)
	}
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = &name
	l.Spec.LeaseDurationSeconds = &secs
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renew lease of node %s: %w", name, err)
	}
	return nil
}

// heartbeat renews every Node's Lease until ctx ends.
func (k *Kubelet) heartbeat(ctx context.Context) {
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range k.nodes {
			if err := k.renewLease(ctx, n); err != nil && ctx.Err() == nil {
				k.logf("%v", err)
			}
		}
	}
}

// waitNodesSchedulable waits on a watch until the nodes are Ready and
// the node lifecycle controller has lifted the not-ready taint that
// admission puts on every new Node, so that the first pod of a test is
// scheduled at once. failed, checked as it waits, says when what runs
// the nodes is gone.
func waitNodesSchedulable(ctx context.Context, client kubernetes.Interface, names []string, failed func() error) error {
	nodes := client.CoreV1().Nodes()
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	check := func(n *corev1.Node) {
		if !pending[n.Name] || !nodeReady(n) {
			return
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return
			}
		}
		delete(pending, n.Name)
	}
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range list.Items {
		check(&list.Items[i])
	}
	if len(pending) == 0 {
		return nil
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	defer w.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %v not Ready or still tainted not-ready: %w", pending, ctx.Err())
		case <-tick.C:
			if err := failed(); err != nil {
				return err
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return waitNodesSchedulable(ctx, client, names, failed) // the watch ended early: list again
			}
			if n, ok := ev.Object.(*corev1.Node); ok {
				check(n)
			}
		}
	}
	return nil
}
