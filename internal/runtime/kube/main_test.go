package kube_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/berth-mcp/berth/internal/kubetest"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
)

// The images of the tests: the agent image holds the real berth-agent;
// any other image runs its command on the host (the kubelet stand-in has
// no container runtime), which for a sandbox is the copied agent.
const (
	agentImage   = "registry.test/berth-agent:dev"
	sandboxImage = "registry.test/sandbox:1"
	missingImage = "registry.test/missing:1"
)

var (
	env      *kubetest.Env
	agentBin string
)

// TestMain starts one control plane for the package; each test works in
// a namespace of its own.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	bin, cleanup, err := orchtest.BuildAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = bin
	dir, err := os.MkdirTemp("", "kube-runtime-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Room for the benchmark's hundreds of pods of 1 CPU and 2Gi each.
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods: resource.MustParse("500"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti")}
	env, err = kubetest.New(context.Background(), kubetest.Options{Dir: dir, NodeCapacity: capacity})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		if !errors.Is(err, kubetest.ErrNoBinaries) {
			fmt.Fprintf(os.Stderr, "logs in %s\n", dir)
		}
		os.Exit(1)
	}
	env.Kubelet.AddImage(agentImage, kubetest.Image{Files: map[string]string{"/berth-agent": agentBin}})
	env.Kubelet.MissingImage(missingImage)
	code := m.Run()
	env.Close()
	cleanup()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", dir)
	}
	os.Exit(code)
}

// newRuntime makes a sandbox namespace, grants berth's ServiceAccount
// there exactly the Role shipped in deploy/, and returns a runtime acting
// as that ServiceAccount, closed when t ends.
func newRuntime(t *testing.T, opts kube.Options) (*kube.Runtime, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	ns := env.Namespace(t, "sbx")
	applyShippedRBAC(t, ns)
	opts.Config = env.ConfigFor(t, ns, "berth")
	opts.Namespaces = []string{ns}
	if opts.AgentImage == "" {
		opts.AgentImage = agentImage
	}
	rt, err := kube.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, ns
}

// applyShippedRBAC creates the Roles and bindings of deploy/base/rbac.yaml
// for namespace ns, with berth's ServiceAccount in ns.
func applyShippedRBAC(t testing.TB, ns string) {
	t.Helper()
	raw, err := os.ReadFile("../../../deploy/base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dec := yaml.NewYAMLReader(bufioReader(raw))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("deploy/base/rbac.yaml: %v", err)
		}
		rb := env.Client.RbacV1()
		switch o := obj.(type) {
		case *rbacv1.Role:
			o.Namespace = ns
			_, err = rb.Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			o.Subjects[0].Namespace = ns
			_, err = rb.RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = rb.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			if err != nil && isExists(err) {
				err = nil
			}
		case *rbacv1.ClusterRoleBinding:
			o.Name += "-" + ns
			o.Subjects[0].Namespace = ns
			_, err = rb.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() { rb.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		default:
			t.Fatalf("deploy/base/rbac.yaml holds a %T", obj)
		}
		if err != nil {
			t.Fatalf("apply deploy/base/rbac.yaml: %v", err)
		}
	}
}
