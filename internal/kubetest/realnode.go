package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// RealNode is a real Kubernetes node beside the control plane: the real
// kubelet (built with the control plane by test/kubeenv) on containerd
// and runc from Debian's packages, pods on a CNI bridge of the node's own.
// Its pods are real containers: their own mount, PID, network and IPC
// namespaces, the uid, capabilities, seccomp profile, read-only root and
// cgroup limits their spec asks for.
//
// Everything it makes is its own, so several nodes (test binaries) run
// side by side: its folder (containerd's root and state, the kubelet's
// root, logs, network namespaces), containerd's socket, the bridge, the
// pod subnet, a cgroup under every hierarchy's root, the kubelet's port.
// Stopping it deletes its pods through the API, stops the kubelet and
// containerd, then sweeps: it kills what is left of its processes,
// unmounts what is left under its folder, deletes the bridge and the
// cgroups. The same sweep runs if the test binary dies (see sweeper).
//
// The host programs it needs, and why it may not start, are in
// RealNodeUnavailable.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// IP is the node's address: the bridge's, where the host reaches
	// the pod network and kube-apiserver reaches the kubelet.
	IP net.IP
	// Subnet is the pods' network.
	Subnet *net.IPNet

	dir        string // short: socket paths are bounded
	socket     string // containerd's
	bridge     string
	cgroupRoot string // a name, made in every hierarchy's root
	pki        *pki
	apiPort    int
	client     kubernetes.Interface
	logDir     string

	sweep      *sweeper
	containerd *component
	kubelet    *component
	started    time.Duration // from New to Ready, for the test's log
	importTime time.Duration // of it, writing and importing the images
}

// realNodeConfig is what Env hands the real node.
type realNodeConfig struct {
	client       kubernetes.Interface
	pki          *pki
	apiPort      int
	kubeletBin   string
	dir, logDir  string
	images       []NodeImage
	podPidsLimit int64
}

// startRealNode starts containerd, imports the images, starts the
// kubelet and waits until its Node is Ready and schedulable.
func startRealNode(ctx context.Context, cfg realNodeConfig) (n *RealNode, err error) {
	began := time.Now()
	id := randomHex(4)
	n = &RealNode{
		Name:       "kubetest-real-" + id,
		dir:        cfg.dir,
		socket:     filepath.Join(cfg.dir, "containerd.sock"),
		bridge:     "kt" + id, // at most 15 bytes
		cgroupRoot: "kubetest-" + id,
		pki:        cfg.pki,
		apiPort:    cfg.apiPort,
		client:     cfg.client,
		logDir:     cfg.logDir,
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, fmt.Errorf("real node: %w", err)
	}
	// The sweeper first: whatever follows, it undoes, even if the test
	// binary dies halfway.
	if n.sweep, err = startSweeper(n); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.stop(context.Background())
		}
	}()
	if n.Subnet, err = freeSubnet(); err != nil {
		return nil, err
	}
	n.IP = gatewayOf(n.Subnet)
	if err := n.makeBridge(ctx); err != nil {
		return nil, err
	}
	if err := makeCgroupRoots(n.cgroupRoot); err != nil {
		return nil, err
	}
	conf, err := writeContainerdConfig(n.dir, n.socket, n.bridge, n.Subnet)
	if err != nil {
		return nil, err
	}
	if n.containerd, err = startComponent("containerd", containerdBin, []string{"--config", conf, "--log-level", "info"},
		filepath.Join(n.logDir, "containerd.log")); err != nil {
		return nil, err
	}
	if err := n.containerd.waitReady(ctx, socketProbe(n.socket)); err != nil {
		return nil, err
	}
	pause, err := PauseImage(ctx, pauseRef)
	if err != nil {
		return nil, err
	}
	imported := time.Now()
	if err := n.Import(ctx, append([]NodeImage{pause}, cfg.images...)...); err != nil {
		return nil, err
	}
	n.importTime = time.Since(imported)
	// The kubelet changes kernel settings as its container manager
	// starts, which it has once its Node is Ready: they are put back
	// then (see kernelTunables).
	restore, err := holdKernelTunables(ctx, n.dir)
	if err != nil {
		return nil, err
	}
	err = n.startKubelet(ctx, cfg)
	if err == nil {
		err = waitNodesSchedulable(ctx, n.client, []string{n.Name}, n.kubeletExited)
	}
	restore()
	if err != nil {
		return nil, fmt.Errorf("real node %s: %w", n.Name, err)
	}
	n.started = time.Since(began)
	return n, nil
}

// startKubelet starts the kubelet.
func (n *RealNode) startKubelet(ctx context.Context, cfg realNodeConfig) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	if err := n.pki.nodeServing(n.Name, n.IP, filepath.Join(n.dir, "kubelet-serving.crt"), filepath.Join(n.dir, "kubelet-serving.key")); err != nil {
		return err
	}
	config, kubeconfig, err := writeRealKubeletConfig(n, ports[0], cfg.podPidsLimit)
	if err != nil {
		return err
	}
	n.kubelet, err = startComponent("kubelet", cfg.kubeletBin, []string{
		"--config=" + config,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet-pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP.String(),
		"--v=2",
	}, filepath.Join(n.logDir, "kubelet.log"))
	return err
}

// kubeletExited returns an error once the kubelet or containerd has
// exited.
func (n *RealNode) kubeletExited() error {
	for _, c := range []*component{n.containerd, n.kubelet} {
		if c == nil {
			continue
		}
		select {
		case <-c.done:
			return c.exited()
		default:
		}
	}
	return nil
}

// Import loads the images into the node's containerd, where the kubelet
// finds them: `ctr images import` of an archive written here.
func (n *RealNode) Import(ctx context.Context, images ...NodeImage) error {
	if len(images) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp(n.dir, "images-")
	if err != nil {
		return fmt.Errorf("import images: %w", err)
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "images.tar")
	if err := writeArchive(archive, tmp, images); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, ctrBin, "--address", n.socket, "--namespace", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import images into the real node (ctr images import): %v: %s", err, out)
	}
	return nil
}

// Dir is the node's folder: containerd's and the kubelet's files.
func (n *RealNode) Dir() string { return n.dir }

// StartTime is how long the node took from nothing to Ready, and of
// that how long writing and importing its images took.
func (n *RealNode) StartTime() (total, images time.Duration) { return n.started, n.importTime }

// stop deletes the node's pods, stops the kubelet and containerd and
// sweeps what is left. ctx bounds the wait for the pods.
func (n *RealNode) stop(ctx context.Context) {
	if n.kubelet != nil && n.kubeletExited() == nil {
		n.deletePods(ctx)
	}
	if n.kubelet != nil {
		n.kubelet.stop(10 * time.Second)
	}
	if n.containerd != nil {
		n.containerd.stop(10 * time.Second)
	}
	if n.sweep != nil {
		n.sweep.close()
	}
}

// deletePods deletes every pod bound to the node and waits until the
// kubelet has removed them: it deletes a pod's object only once its
// containers have stopped, its sandbox's network is torn down and its
// volumes are unmounted.
func (n *RealNode) deletePods(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sel := fields.OneTermEqualSelector("spec.nodeName", n.Name).String()
	grace := int64(1)
	for {
		pods, err := n.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(pods.Items) == 0 {
			return
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				_ = n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// makeBridge makes the node's bridge with its address, up: the kubelet
// serves there from the start, and the CNI bridge plugin takes the
// bridge as it finds it.
func (n *RealNode) makeBridge(ctx context.Context) error {
	ones, _ := n.Subnet.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", n.IP, ones), "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("real node bridge: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// freeSubnet picks a /24 in 10.200.0.0/13 that no address or route of
// the host is in (another node's bridge, say).
func freeSubnet() (*net.IPNet, error) {
	used, err := hostNetworks()
	if err != nil {
		return nil, err
	}
	for range 50 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		cand := &net.IPNet{IP: net.IPv4(10, 200+b[0]%8, b[1], 0).To4(), Mask: net.CIDRMask(24, 32)}
		free := true
		for _, u := range used {
			if u.Contains(cand.IP) || cand.Contains(u.IP) {
				free = false
				break
			}
		}
		if free {
			return cand, nil
		}
	}
	return nil, fmt.Errorf("real node: no free /24 in 10.200.0.0/13 for the pods")
}

// hostNetworks lists the host's interface networks and IPv4 routes.
func hostNetworks() ([]*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	var out []*net.IPNet
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			out = append(out, ipn)
		}
	}
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("host routes: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] == "Iface" {
			continue
		}
		dst, err1 := hex.DecodeString(f[1])
		mask, err2 := hex.DecodeString(f[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		// Little-endian words.
		ip := net.IPv4(dst[3], dst[2], dst[1], dst[0])
		m := net.IPv4Mask(mask[3], mask[2], mask[1], mask[0])
		if ones, _ := m.Size(); ones > 0 {
			out = append(out, &net.IPNet{IP: ip, Mask: m})
		}
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nodeReady says whether the Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
