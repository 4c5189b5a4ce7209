package kube_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/kubetest"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
)

// The images of the tests. On the stand-in kubelet the agent image holds
// the real berth-agent and any other image runs its command on the host
// (there is no container runtime), which for a sandbox is the copied
// agent. On the real node they are real images, imported into it (see
// nodeImages): the static agent alone, a Debian image of the host's
// packages, one without a C library, one whose USER is not root; the
// missing image is in no registry.
const (
	agentImage   = "registry.test/berth-agent:dev"
	sandboxImage = "registry.test/sandbox:1"
	missingImage = "registry.test/missing:1"
	staticImage  = "registry.test/static:1"
	nonrootImage = "registry.test/nonroot:1"
)

// importedPolicy is the pull policy of the tests' images, which are
// imported into the real node and in no registry: berth's default asks
// the registry for a tag at every start.
const importedPolicy = corev1.PullIfNotPresent

// nodePidsLimit is the real node's process limit per pod (the kubelet's
// podPidsLimit): the attacks fork past it.
const nodePidsLimit = 128

var (
	// env is the stand-in kubelet's control plane, for the tests of what
	// berth asks of the API (RBAC, admission, scheduling, Jobs, events).
	env *kubetest.Env
	// node runs the sandbox pods the tests look into: the real node
	// where one can start, env elsewhere; nodeNote says which and why.
	node     *kubetest.Env
	nodeNote string
	agentBin string
)

// TestMain starts one control plane with the stand-in kubelet for the
// package and, where it can, a second one with a real node; each test
// works in a namespace of its own.
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
	node, nodeNote, err = startNode(dir)
	if err != nil {
		env.Close()
		cleanup()
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		fmt.Fprintf(os.Stderr, "logs in %s\n", dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kube: sandbox pods run on %s\n", nodeNote)
	code := m.Run()
	if node != env {
		node.Close()
	}
	env.Close()
	cleanup()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", dir)
	}
	os.Exit(code)
}

// startNode starts the control plane with a real node, its images
// imported, where one can start; elsewhere it returns env.
func startNode(dir string) (*kubetest.Env, string, error) {
	kind, note, err := kubetest.ChooseNode(kubetest.NodeAuto, "")
	if err != nil || kind != kubetest.NodeReal {
		return env, note, err
	}
	ctx := context.Background()
	images, err := nodeImages(ctx)
	if err != nil {
		return nil, "", err
	}
	began := time.Now()
	e, err := kubetest.New(ctx, kubetest.Options{Dir: filepath.Join(dir, "node"), Node: kubetest.NodeReal, NodeImages: images, PodPidsLimit: nodePidsLimit})
	if err != nil {
		return nil, "", err
	}
	return e, fmt.Sprintf("%s (with its control plane and images in %s)", e.NodeNote, time.Since(began).Round(time.Millisecond)), nil
}

// nodeImages are the real node's images (see the constants).
func nodeImages(ctx context.Context) ([]kubetest.NodeImage, error) {
	static, cleanup, err := orchtest.BuildAgent()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	agent, err := kubetest.AgentImage(agentImage, static)
	if err != nil {
		return nil, err
	}
	debian, err := kubetest.DebianImage(ctx, sandboxImage, "")
	if err != nil {
		return nil, err
	}
	nonroot := debian
	nonroot.Ref, nonroot.User = nonrootImage, "1000:1000"
	bare, err := kubetest.StaticImage(staticImage)
	if err != nil {
		return nil, err
	}
	return []kubetest.NodeImage{agent, debian, nonroot, bare}, nil
}

// newRuntime makes a sandbox namespace, grants berth's ServiceAccount
// there exactly the Role shipped in deploy/, and returns a runtime acting
// as that ServiceAccount, closed when t ends. Its pods run on the
// stand-in kubelet.
func newRuntime(t *testing.T, opts kube.Options) (*kube.Runtime, string) {
	t.Helper()
	return newRuntimeOn(t, env, opts)
}

// newNodeRuntime is newRuntime on the real node where there is one; the
// test's log says where its pods run.
func newNodeRuntime(t *testing.T, opts kube.Options) (*kube.Runtime, string) {
	t.Helper()
	if !testing.Short() {
		t.Logf("sandbox pods run on %s", nodeNote)
	}
	return newRuntimeOn(t, node, opts)
}

// onRealNode says whether the sandbox pods run on a real node.
func onRealNode() bool { return node != nil && node.Node != nil }

func newRuntimeOn(t *testing.T, e *kubetest.Env, opts kube.Options) (*kube.Runtime, string) {
	t.Helper()
	if opts.ImagePullPolicy == "" {
		opts.ImagePullPolicy = importedPolicy
	}
	return newRuntimeAsIs(t, e, opts)
}

// newRuntimeAsIs is newRuntimeOn with berth's own pull policy unless opts
// sets one: for sandbox images in a registry.
func newRuntimeAsIs(t *testing.T, e *kubetest.Env, opts kube.Options) (*kube.Runtime, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	ns := e.Namespace(t, "sbx")
	applyShippedRBACOn(t, e, ns)
	opts.Config = e.ConfigFor(t, ns, "berth")
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
	applyShippedRBACOn(t, env, ns)
}

func applyShippedRBACOn(t testing.TB, env *kubetest.Env, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range decodeAll(t, "../../../deploy/base/rbac.yaml") {
		var err error
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
