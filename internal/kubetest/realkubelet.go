package kubetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// realKubeletConfig is the KubeletConfiguration of the real node. Each
// setting that differs from a kubelet's default says why: most are what
// these machines need (no systemd, cgroup v1, no swap accounting, a
// kernel that refuses negative OOM scores) or keep the node's files and
// ports its own, so that several nodes (test binaries) run side by side
// and leave nothing behind.
func realKubeletConfig(n *RealNode, port int, podPidsLimit int64) map[string]any {
	return map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// Served on the node's address only (the bridge's), on a free
		// port: several nodes share the host. kube-apiserver reaches it
		// for logs with its client certificate, which the CA signed.
		"address":           n.IP.String(),
		"port":              port,
		"readOnlyPort":      0,
		"healthzPort":       0,
		"tlsCertFile":       filepath.Join(n.dir, "kubelet-serving.crt"),
		"tlsPrivateKeyFile": filepath.Join(n.dir, "kubelet-serving.key"),
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": n.pki.CA},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		// No systemd here: cgroupfs, as containerd's runc is told.
		"cgroupDriver": "cgroupfs",
		// The node's pods live under a cgroup of their own in every
		// hierarchy, not /kubepods, which another node may be using.
		"cgroupRoot":    "/" + n.cgroupRoot,
		"cgroupsPerQOS": true,
		// These machines run cgroup v1, which kubelet 1.35 and later
		// refuse unless told.
		"failCgroupV1": false,
		// No swap to fail on; and if a machine has some, the tests still run.
		"failSwapOn": false,
		// The kubelet's own score: the kernel refuses the default -999
		// here (see containerd's restrict_oom_score_adj).
		"oomScoreAdj":              0,
		"containerRuntimeEndpoint": "unix://" + n.socket,
		// No static pods, and every folder under the node's own.
		"staticPodPath":   "",
		"podLogsDir":      filepath.Join(n.dir, "pod-logs"),
		"volumePluginDir": filepath.Join(n.dir, "volume-plugins"),
		// No iptables chains on the host: the tests need no kube-proxy
		// rules, and the host's tables stay as they were.
		"makeIPTablesUtilChains": false,
		// No cluster DNS: sandboxes reach nothing by name in the tests.
		"resolvConf":    "/etc/resolv.conf",
		"clusterDomain": "cluster.local",
		// The images are imported, never pulled: the kubelet must not
		// collect them when the host's disk fills with other work.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		// Volume usage measured every second, not every minute: a pod
		// past an emptyDir's sizeLimit is evicted within seconds.
		"volumeStatsAggPeriod": "1s",
		// The process limit of each pod, which berth's sandboxes rely
		// on: berth sets none in the pod, the node's operator does.
		"podPidsLimit": podPidsLimit,
		"maxPods":      110,
		// Status often, so pod state shows fast in the tests.
		"nodeStatusUpdateFrequency": "2s",
		"syncFrequency":             "10s",
		"serializeImagePulls":       false,
	}
}

// writeRealKubeletConfig writes the kubelet's config and kubeconfig.
func writeRealKubeletConfig(n *RealNode, port int, podPidsLimit int64) (config, kubeconfig string, err error) {
	b, err := json.MarshalIndent(realKubeletConfig(n, port, podPidsLimit), "", "  ")
	if err != nil {
		return "", "", fmt.Errorf("kubelet config: %w", err)
	}
	config = filepath.Join(n.dir, "kubelet-config.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		return "", "", fmt.Errorf("kubelet config: %w", err)
	}
	cert, key := filepath.Join(n.dir, "kubelet-client.crt"), filepath.Join(n.dir, "kubelet-client.key")
	if err := n.pki.nodeClient(n.Name, cert, key); err != nil {
		return "", "", err
	}
	kubeconfig = filepath.Join(n.dir, "kubelet.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: https://127.0.0.1:%s
    certificate-authority: %s
users:
- name: kubelet
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: kubetest
  context: {cluster: kubetest, user: kubelet}
current-context: kubetest
`, strconv.Itoa(n.apiPort), n.pki.CA, cert, key)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return "", "", fmt.Errorf("kubelet kubeconfig: %w", err)
	}
	return config, kubeconfig, nil
}
