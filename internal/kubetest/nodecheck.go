package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// NodeEnv chooses, for Options.Node = NodeAuto, what runs the pods:
// "real" requires the real node (New fails where it cannot start, for CI
// that must not lose it quietly), "stand-in" takes the stand-in kubelet
// even where a real node could start, anything else lets kubetest choose.
const NodeEnv = "BERTH_KUBE_NODE"

// NodeKind says what runs an Env's pods.
type NodeKind string

const (
	// NodeStandIn is the process kubelet (the default): several Nodes,
	// containers as host processes, no isolation; see Kubelet.
	NodeStandIn NodeKind = ""
	// NodeReal is one real node: the real kubelet on containerd and runc;
	// see RealNode. New fails where it cannot start.
	NodeReal NodeKind = "real"
	// NodeAuto is the real node where it can start (RealNodeUnavailable
	// is nil) and the stand-in where it cannot; Env.NodeNote says which
	// and why, for the test to log.
	NodeAuto NodeKind = "auto"
)

// RealNodeUnavailable says why a real node cannot start here, or nil
// when it can: it needs Linux, root (containerd, runc, network
// namespaces and cgroups), the kubelet built by `make kubeenv` in binDir
// ($BERTH_KUBE_BIN when empty), and containerd, runc, the CNI plugins
// and iproute2 from Debian's packages (`make node` installs them).
func RealNodeUnavailable(binDir string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("a real node needs Linux, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("a real node needs root (containerd, runc, network namespaces, cgroups); the tests run as uid %d", os.Geteuid())
	}
	if binDir == "" {
		binDir = os.Getenv(BinEnv)
	}
	var missing []error
	if !isExecutable(filepath.Join(binDir, "kubelet")) {
		missing = append(missing, fmt.Errorf("no kubelet in %q (run `make kubeenv`)", binDir))
	}
	for _, p := range []string{containerdBin, ctrBin, runcBin, shimBin, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")} {
		if !isExecutable(p) {
			missing = append(missing, fmt.Errorf("no %s (run `make node`, or apt-get install containerd runc containernetworking-plugins)", p))
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, errors.New("no ip command (apt-get install iproute2)"))
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		missing = append(missing, errors.New("no cgroup filesystem at /sys/fs/cgroup"))
	}
	return errors.Join(missing...)
}

// ChooseNode resolves kind (NodeAuto, with the NodeEnv override) to
// NodeReal or NodeStandIn, with the note an Env keeps: for the stand-in
// under NodeAuto, why no real node can start. New calls it; a package
// that shares a stand-in Env calls it too, to start a second Env for a
// real node only where one can start.
func ChooseNode(kind NodeKind, binDir string) (NodeKind, string, error) {
	if kind == NodeStandIn {
		return NodeStandIn, "the stand-in process kubelet", nil
	}
	want := os.Getenv(NodeEnv)
	if kind == NodeAuto && want == "stand-in" {
		return NodeStandIn, fmt.Sprintf("the stand-in process kubelet, as %s=stand-in asks", NodeEnv), nil
	}
	err := RealNodeUnavailable(binDir)
	switch {
	case err == nil:
		return NodeReal, "", nil
	case kind == NodeReal || want == "real":
		return "", "", fmt.Errorf("kubetest: no real node can start here: %w", err)
	default:
		return NodeStandIn, fmt.Sprintf("the stand-in process kubelet: no real node can start here (%v); pods run as host processes without isolation", err), nil
	}
}
