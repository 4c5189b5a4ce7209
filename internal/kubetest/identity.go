package kubetest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ConfigFor returns a client config whose identity is exactly the
// ServiceAccount namespace/name (a token the API server issued for it
// through TokenRequest), so RBAC decides what it may do: grant it with
// Roles and RoleBindings like any ServiceAccount. The namespace and the
// ServiceAccount are created when missing. The config has client-go's
// default rate limits, as a real client would.
func (e *Env) ConfigFor(t testing.TB, namespace, serviceAccount string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := e.configFor(ctx, namespace, serviceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// KubeconfigFor writes a kubeconfig file for ConfigFor's identity, with
// namespace as its context's namespace (what a client such as
// `berth serve --kubeconfig` takes as its own), and returns its path.
func (e *Env) KubeconfigFor(t testing.TB, namespace, serviceAccount string) string {
	t.Helper()
	cfg := e.ConfigFor(t, namespace, serviceAccount)
	path := filepath.Join(t.TempDir(), serviceAccount+".kubeconfig")
	if err := writeKubeconfig(path, cfg, namespace); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e *Env) configFor(ctx context.Context, namespace, serviceAccount string) (*rest.Config, error) {
	if err := e.ensureNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: namespace}}
	if _, err := e.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubetest: create ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	day := int64(24 * 3600)
	tr, err := e.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: token for ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	cfg := e.cp.configWithToken(tr.Status.Token)
	return cfg, nil
}

// Namespace creates a namespace of its own for t, named prefix-<random>,
// waits until pods can be created in it (admission refuses them until
// the ServiceAccount controller has made its "default" ServiceAccount)
// and deletes it when t ends. Tests sharing one Env stay apart this way,
// also under -count.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create namespace %s-...: %v", prefix, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubetest: delete namespace %s: %v", ns.Name, err)
		}
	})
	if _, err := e.waitServiceAccount(ctx, ns.Name, "default"); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func (e *Env) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create namespace %s: %w", name, err)
	}
	return nil
}

// waitServiceAccount waits on a watch until namespace/name exists.
func (e *Env) waitServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return e.Client.CoreV1().ServiceAccounts(namespace).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return e.Client.CoreV1().ServiceAccounts(namespace).Watch(ctx, o)
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.ServiceAccount{}, nil, func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Added || ev.Type == watch.Modified, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return ev.Object.(*corev1.ServiceAccount), nil
}
