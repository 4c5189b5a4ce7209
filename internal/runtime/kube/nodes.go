package kube

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-mcp/berth/internal/runtime"
)

var _ runtime.NodeHolder = (*Runtime)(nil)

// Node holders are IdeGYM's way to keep nodes for a client: a Deployment
// of pause pods, one per node (required anti-affinity on the hostname),
// with a PodDisruptionBudget so voluntary evictions do not take them. A
// cluster autoscaler keeps the nodes they occupy.
const (
	labelNodeHolder = "berth.dev/node-holder"
	// DefaultPauseImage runs nothing, in the least memory possible.
	DefaultPauseImage = "registry.k8s.io/pause:3.10"
)

func holderName(clientID string) string { return "berth-nodes-" + clientID }

// HoldNodes implements runtime.NodeHolder.
func (r *Runtime) HoldNodes(ctx context.Context, ns, clientID string, n int) error {
	if _, err := r.lister(ns); err != nil {
		return err
	}
	name := holderName(clientID)
	deployments := r.client.AppsV1().Deployments(ns)
	pdbs := r.client.PolicyV1().PodDisruptionBudgets(ns)
	if n == 0 {
		for _, err := range []error{
			deployments.Delete(ctx, name, metav1.DeleteOptions{}),
			pdbs.Delete(ctx, name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("release the nodes of client %s: %w", clientID, err)
			}
		}
		return nil
	}
	want := r.holderDeployment(ns, clientID, n)
	_, err := deployments.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = r.scaleHolder(ctx, ns, name, n)
	}
	if err != nil {
		return fmt.Errorf("hold %d nodes for client %s: %w", n, clientID, err)
	}
	minAvailable := intstr.FromInt32(int32(n))
	_, err = pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: want.Labels},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     want.Spec.Selector,
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("protect the nodes of client %s: %w", clientID, err)
	}
	return nil
}

// scaleHolder sets the replicas of an existing holder, retrying on a
// conflict with another writer.
func (r *Runtime) scaleHolder(ctx context.Context, ns, name string, n int) error {
	for range 5 {
		d, err := r.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		replicas := int32(n)
		d.Spec.Replicas = &replicas
		if _, err = r.client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("deployment %s kept changing under berth", name)
}

// HeldNodes implements runtime.NodeHolder: the holder pods that are ready.
func (r *Runtime) HeldNodes(ctx context.Context, ns, clientID string) (int, error) {
	d, err := r.client.AppsV1().Deployments(ns).Get(ctx, holderName(clientID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("nodes of client %s: %w", clientID, err)
	}
	return int(d.Status.ReadyReplicas), nil
}

func (r *Runtime) holderDeployment(ns, clientID string, n int) *appsv1.Deployment {
	labels := map[string]string{labelManagedBy: managedBy, labelName: "berth-node-holder", labelClient: clientID, labelNodeHolder: clientID}
	replicas := int32(n)
	no, yes := false, true
	uid := r.opts.RunAsUser
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	pause := r.opts.PauseImage
	if pause == "" {
		pause = DefaultPauseImage
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: holderName(clientID), Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelNodeHolder: clientID}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: &no,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelNodeHolder: clientID}},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{
						Name: "pause", Image: pause, ImagePullPolicy: r.operatorPullPolicy(),
						Resources: corev1.ResourceRequirements{Requests: small, Limits: small},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
							Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
				},
			},
		},
	}
}

// Holders implements runtime.NodeHolder.
func (r *Runtime) Holders(ctx context.Context) ([]runtime.NodeHolding, error) {
	var out []runtime.NodeHolding
	for _, ns := range r.namespaces() {
		list, err := r.client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: labelName + "=berth-node-holder," + labelManagedBy + "=" + managedBy})
		if err != nil {
			return nil, fmt.Errorf("node holders in %s: %w", ns, err)
		}
		for _, d := range list.Items {
			if c := d.Labels[labelNodeHolder]; c != "" {
				out = append(out, runtime.NodeHolding{Namespace: ns, ClientID: c})
			}
		}
	}
	return out, nil
}
