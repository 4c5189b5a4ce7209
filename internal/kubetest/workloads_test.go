package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// until polls cond on a ticker for objects that have no WaitPod: used
// only where a watch would add nothing but code (a Job's condition, a
// list of pods); its deadline is WaitTimeout.
func until(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s (last error: %v)", what, WaitTimeout, last)
		case <-tick.C:
		}
	}
}

func TestJobSucceeds(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "job")
	job, err := e.Client.BatchV1().Jobs(ns).Create(context.Background(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "build"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "echo built"}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "job complete", func(ctx context.Context) (bool, error) {
		j, err := e.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %s", c.Message)
			}
		}
		return false, fmt.Errorf("conditions %v", j.Status.Conditions)
	})
	pods, err := e.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=build"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("job pods %v, %v", pods, err)
	}
	if ph := pods.Items[0].Status.Phase; ph != corev1.PodSucceeded {
		t.Fatalf("job pod phase %s", ph)
	}
}

// Required anti-affinity on kubernetes.io/hostname puts one pod per
// Node; one replica more than Nodes stays Pending, Unschedulable.
func TestAntiAffinitySpreadsOverNodes(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "spread")
	sel := map[string]string{"app": "holder"}
	replicas := int32(len(e.Nodes) + 1)
	_, err := e.Client.AppsV1().Deployments(ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "holder"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "one ready pod per node, one unschedulable", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return false, err
		}
		nodes := map[string]bool{}
		unschedulable := 0
		for _, p := range pods.Items {
			if ready(&p) {
				nodes[p.Spec.NodeName] = true
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if len(nodes) == len(e.Nodes) && unschedulable == 1 {
			return true, nil
		}
		return false, fmt.Errorf("ready on nodes %v, %d unschedulable of %d pods", nodes, unschedulable, len(pods.Items))
	})
}

// A Secret owned by a Pod goes with it (the garbage collector).
func TestOwnedSecretCollected(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "gc")
	pod := create(t, e, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
	})
	_, err := e.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		}}},
		StringData: map[string]string{"token": "x"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := e.Client.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	until(t, "owned secret deleted", func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Secrets(ns).Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// A ServiceAccount's identity gets what its Role grants and no more.
func TestServiceAccountRBAC(t *testing.T) {
	e := need(t)
	t.Parallel()
	ns := e.Namespace(t, "rbac")
	ctx := context.Background()
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "berth-reads-pods"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "berth", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// As berth serve --kubeconfig would: the file's identity and namespace.
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: e.KubeconfigFor(t, ns, "berth")}, nil)
	if got, _, err := loader.Namespace(); err != nil || got != ns {
		t.Fatalf("kubeconfig namespace %q, %v; want %s", got, err, ns)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list pods as the ServiceAccount: %v", err)
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nope"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":berth") {
		t.Fatalf("create pod as the ServiceAccount: %v, want forbidden for system:serviceaccount:%s:berth", err, ns)
	}
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets as the ServiceAccount: %v, want forbidden", err)
	}
}
