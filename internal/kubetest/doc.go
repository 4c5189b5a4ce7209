// Package kubetest starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver (RBAC on, static-token identities, TLS on free loopback
// ports, data under the test's temporary directory), kube-controller-manager
// and kube-scheduler, built from the Go module proxy by `make kubeenv` (the
// module test/kubeenv) into the folder BERTH_KUBE_BIN names.
//
// The pods run on one of two kinds of node (Options.Node):
//
//   - A real node (RealNode): the real kubelet, built with the control
//     plane, on containerd and runc from Debian's packages with the CNI
//     bridge plugin (`make node` installs them). Pods are real containers:
//     uid, capabilities, seccomp, read-only root, namespaces and cgroup
//     limits as their spec asks. Its images are made by the test
//     (NodeImage: the static agent, DebianImage, StaticImage, ...) and
//     imported without a registry. It needs root; where it cannot start,
//     NodeAuto takes the stand-in and Env.NodeNote says why.
//   - The stand-in (Kubelet, the default): several Nodes whose pods'
//     containers run as local processes (see kubelet.go for what it
//     honours and what it cannot), for tests of what a client asks of the
//     API across several Nodes or hundreds of pods.
//
// Everything else is the real component, so RBAC (with the Node
// authorizer for a real node's kubelet), admission, scheduling (affinity,
// anti-affinity, resources), Jobs, Deployments, garbage collection of
// owned objects and namespace deletion behave as on a cluster.
//
// A test that needs the control plane calls Start; when the binaries are
// missing it fails and says to run `make kubeenv` (it skips under
// `go test -short`):
//
//	env := kubetest.Start(t, kubetest.Options{})
//	env.Kubelet.AddImage("berth-agent:test", kubetest.Image{Files: map[string]string{"/berth-agent": agentBin}})
//	env.Kubelet.MissingImage("registry.test/nothing:1")
//	ns := env.Namespace(t, "sandboxes")  // a fresh namespace, deleted with t
//	cfg := env.ConfigFor(t, ns, "berth") // exactly that ServiceAccount: RBAC applies
//	cs := kubernetes.NewForConfigOrDie(cfg)
//	... create a pod with cs ...
//	pod := env.WaitPod(t, ns, name, func(p *corev1.Pod) bool { return p != nil && p.Status.PodIP != "" })
//
// On a real node:
//
//	img, err := kubetest.DebianImage(ctx, "registry.test/sandbox:1", "")
//	env := kubetest.Start(t, kubetest.Options{Node: kubetest.NodeReal, NodeImages: []kubetest.NodeImage{img}})
//	... pods with image registry.test/sandbox:1, pull policy IfNotPresent ...
//
// Starting takes about 6 seconds on an idle 2-core machine (a real node
// about 7 more), so a package whose tests all need a control plane shares
// one: New in TestMain (see main_test.go here), Close after m.Run, and
// Namespace per test.
package kubetest
