// Package kubetest starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver (RBAC on, static-token identities, TLS on free loopback
// ports, data under the test's temporary directory), kube-controller-manager
// and kube-scheduler, built from the Go module proxy by `make kubeenv` (the
// module test/kubeenv) into the folder BERTH_KUBE_BIN names.
//
// Only the kubelet is a stand-in: Kubelet registers several Nodes and runs
// the containers of the pods bound to them as local processes (see
// kubelet.go for what it honours and what it cannot). Everything else is
// the real component, so RBAC, admission, scheduling (affinity,
// anti-affinity, resources), Jobs, Deployments, garbage collection of owned
// objects and namespace deletion behave as on a cluster.
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
// Starting takes about 6 seconds on an idle 2-core machine, so a package
// whose tests all need a control plane shares one: New in TestMain (see
// main_test.go here), Close after m.Run, and Namespace per test.
package kubetest
