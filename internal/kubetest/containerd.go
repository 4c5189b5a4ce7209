package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// The host programs a real node runs, from Debian's packages (the
// Makefile's node target installs them).
const (
	containerdBin = "/usr/bin/containerd"
	ctrBin        = "/usr/bin/ctr"
	runcBin       = "/usr/sbin/runc"
	shimBin       = "/usr/bin/containerd-shim-runc-v2"
	cniBinDir     = "/usr/lib/cni"
)

// pauseRef is the sandbox image of the node's pods: kubetest's own pause
// (see pause/), imported like every other image.
const pauseRef = "kubetest.local/pause:1"

// containerdConfig is the node's containerd: everything under the node's
// folder (nothing in /etc/containerd, /var/lib/containerd or
// /run/containerd but the shims' sockets, which containerd 1.6 always
// puts in /run/containerd/s), its own socket, and only the CRI plugin's
// pieces a kubelet needs.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
# Snapshotters and services this node never uses would only fail to load
# or log noise (no btrfs, zfs or devmapper here).
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Pause}}"
  # The VMs berth is tested on refuse a negative oom_score_adj even to
  # root, and runc sets the one the kubelet asks for each container (down
  # to -998 for a Guaranteed pod): with this containerd keeps every
  # container at or above its own score instead, and runc starts.
  restrict_oom_score_adj = true
  # Network namespaces are mounted in the node's folder, not in the
  # host's /var/run/netns, so that tearing the node down finds them all.
  netns_mounts_under_state_dir = true
  # No AppArmor or SELinux here; no hugetlb controller in every kernel.
  disable_apparmor = true
  enable_selinux = false
  tolerate_missing_hugetlb_controller = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{{.Runc}}"
        # runc's state in the node's folder, not /run/containerd/runc.
        Root = "{{.Dir}}/runc"
        # No systemd on these machines: the kubelet's cgroupfs driver
        # must match (see kubeletConfig).
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBin}}"
    conf_dir = "{{.Dir}}/cni"
    max_conf_num = 1
  # No registry configuration: the tests' registries are on loopback
  # (imagetest's, plain HTTP), and the CRI plugin speaks plain HTTP to
  # localhost, 127.0.0.1 and ::1 by itself (its defaultScheme); every
  # other registry gets HTTPS.
`))

// bridgeConfig is the pod network: the CNI bridge plugin on the node's
// own bridge (made by the node, see makeBridge), addresses from
// host-local in the node's subnet. The host reaches every pod by its IP,
// which is how berth reaches its agents; nothing is masqueraded or
// forwarded beyond the bridge. The bridge plugin enforces no
// NetworkPolicy.
//
// The network is named after the bridge: the CNI library caches its
// results in the host's /var/lib/cni/results under the network's name and
// the sandbox's id, and the sweep finds a node's there by both.
func bridgeConfig(bridge string, subnet *net.IPNet, ipamDir string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       bridge,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      bridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": subnet.String(), "gateway": gatewayOf(subnet).String()}}},
				"dataDir": ipamDir,
			},
		}},
	}, "", "  ")
}

// gatewayOf is the subnet's first address: the bridge's, the node's.
func gatewayOf(subnet *net.IPNet) net.IP {
	ip := subnet.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).To4()
}

// writeContainerdConfig writes the containerd and CNI configuration of a
// node whose files are under dir.
func writeContainerdConfig(dir, socket, bridge string, subnet *net.IPNet) (string, error) {
	cniDir := filepath.Join(dir, "cni")
	if err := os.MkdirAll(cniDir, 0o755); err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	cni, err := bridgeConfig(bridge, subnet, filepath.Join(dir, "ipam"))
	if err != nil {
		return "", fmt.Errorf("CNI config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cniDir, "10-kubetest.conflist"), cni, 0o644); err != nil {
		return "", fmt.Errorf("CNI config: %w", err)
	}
	var b strings.Builder
	if err := containerdConfig.Execute(&b, map[string]string{
		"Dir": dir, "Socket": socket, "Pause": pauseRef, "Runc": runcBin, "CNIBin": cniBinDir,
	}); err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	path := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("containerd config: %w", err)
	}
	return path, nil
}

// socketProbe is ready once something accepts on the unix socket.
func socketProbe(socket string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
		if err != nil {
			return err
		}
		return c.Close()
	}
}
