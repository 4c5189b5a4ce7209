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
	fl.StringVar(&f.pullPolicy, "image-pull-policy", "", "pull policy of every container berth starts on Kubernetes: Always, IfNotPresent or Never (default: a sandbox image named by tag is pulled Always, by digest IfNotPresent, berth's own images IfNotPresent); IfNotPresent or Never suit nodes whose images are preloaded")
}

func (f *kubeFlags) open(ctx context.Context, log *slog.Logger) (*kube.Runtime, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	return kube.New(ctx, kube.Options{
		Config: cfg, Namespaces: f.namespaces, AgentImage: f.agentImage, PodNetwork: f.podNetwork,
		CPU: f.cpu, Memory: f.memory, WorkspaceSize: f.workspace, TmpSize: f.tmp, Logger: log,
		ImageRegistry: f.registry, RegistrySecret: f.pushSecret, KanikoImage: f.kaniko,
		ImagePullPolicy: corev1.PullPolicy(f.pullPolicy),
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
