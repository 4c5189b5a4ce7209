package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// kubeFlags configure the Kubernetes runtime.
type kubeFlags struct {
	kubeconfig string
	namespaces []string
	agentImage string
	podNetwork string
	cpu        string
	memory     string
	workspace  string
	tmp        string
	registry   string
	pushSecret string
	kaniko     string
	pullPolicy string
	// The egress gateway's listeners and the address pods reach them at.
	egressListen, egressDNSListen, egressAddress string
}

func (f *kubeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for --runtime kubernetes (default: the in-cluster service account)")
	fl.StringSliceVar(&f.namespaces, "kube-namespaces", []string{"default"}, "namespaces berth runs sandbox pods in (bind berth's Role in each)")
	fl.StringVar(&f.agentImage, "agent-image", "", "image holding the static berth-agent at /berth-agent (its init container copies it into each sandbox)")
	fl.StringVar(&f.podNetwork, "pod-network", kube.PodNetworkDirect, "how berth reaches sandbox pods: direct (pod IPs, berth runs in the cluster) or apiserver (the API server's pod proxy, from outside the cluster)")
	fl.StringVar(&f.cpu, "pod-cpu", kube.DefaultCPU, "CPU of each sandbox pod (requests = limits; resources.cpu overrides it)")
	fl.StringVar(&f.memory, "pod-memory", kube.DefaultMemory, "memory of each sandbox pod (requests = limits; resources.memory overrides it)")
	fl.StringVar(&f.workspace, "pod-workspace-size", kube.DefaultWorkspaceSize, "size limit of each sandbox pod's workspace volume")
	fl.StringVar(&f.tmp, "pod-tmp-size", kube.DefaultTmpSize, "size limit of each sandbox pod's /tmp volume")
	fl.StringVar(&f.registry, "image-registry", "", "registry repository prefix image builds push to, e.g. registry.example.com/berth: on Kubernetes the Kaniko jobs push there; the local runtime pushes the images it builds from OCI images there (with --registry-auth-file's credentials), else keeps them in its cache as berth.local/NAME")
	fl.StringVar(&f.pushSecret, "image-registry-secret", "", "kubernetes.io/dockerconfigjson Secret (in the build's namespace) with the credentials to push")
	fl.StringVar(&f.kaniko, "kaniko-image", kube.DefaultKanikoImage, "Kaniko executor image of build jobs")
	fl.StringVar(&f.egressListen, "kube-egress-listen", "", "host:port where berth serves the sandbox pods' egress proxy (HTTP CONNECT and SOCKS5), e.g. :3128; with it every sandbox pod's connections out go through berth, which applies its server's network policy, and the sandbox namespace's NetworkPolicy must let the pods reach nothing else (see docs/deploy.md). Without it berth refuses network policies on Kubernetes")
	fl.StringVar(&f.egressDNSListen, "kube-egress-dns-listen", "", "host:port where berth answers the sandbox pods' DNS over UDP and TCP, e.g. :5353 behind a Service's port 53 (needed with --kube-egress-listen)")
	fl.StringVar(&f.egressAddress, "kube-egress-address", "", "the IP address sandbox pods reach the egress listeners at: the proxy on --kube-egress-listen's port, DNS on port 53 (a resolv.conf names no port), e.g. the cluster IP of berth's egress Service (default: --kube-egress-listen's host)")
	fl.StringVar(&f.pullPolicy, "image-pull-policy", "", "pull policy of every container berth starts on Kubernetes: Always, IfNotPresent or Never (default: a sandbox image named by tag is pulled Always, by digest IfNotPresent, berth's own images IfNotPresent); IfNotPresent or Never suit nodes whose images are preloaded")
}

// open starts the runtime; eg are the egress options the runtimes share
// (--egress-reachable, --egress-dns, the limits).
func (f *kubeFlags) open(ctx context.Context, log *slog.Logger, eg local.EgressOptions) (*kube.Runtime, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	return kube.New(ctx, kube.Options{
		Config: cfg, Namespaces: f.namespaces, AgentImage: f.agentImage, PodNetwork: f.podNetwork,
		CPU: f.cpu, Memory: f.memory, WorkspaceSize: f.workspace, TmpSize: f.tmp, Logger: log,
		ImageRegistry: f.registry, RegistrySecret: f.pushSecret, KanikoImage: f.kaniko,
		ImagePullPolicy: corev1.PullPolicy(f.pullPolicy),
		Egress: kube.EgressOptions{
			Listen: f.egressListen, DNSListen: f.egressDNSListen, Address: f.egressAddress,
			Guard: eg.Guard, Resolver: eg.Resolver, Limits: eg.Limits,
		},
	})
}

func (f *kubeFlags) restConfig() (*rest.Config, error) {
	if f.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--runtime kubernetes outside a cluster needs --kubeconfig: %w", err)
	}
	return cfg, nil
}
