package kubetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// sweeper undoes a real node: a shell in a process group of its own,
// reading a pipe from the test binary. When the pipe closes, because the
// node stops or because the test binary died (the panic of a test
// timeout, a SIGKILL), it kills every process of the node (containerd,
// the kubelet, the shims, whatever runs in the node's cgroups), removes
// the sockets of its shims and the CNI results cached for its pods,
// unmounts everything under the node's folder (network namespaces,
// volumes, container root filesystems), deletes the bridge (the pods'
// veths went with their namespaces) and the pods' network rules
// (RestrictPods), removes the node's cgroups and
// container log links, puts back the kernel settings the kubelet changed
// if it died before it could, and removes the node's folder. A node
// stopped normally has little left to sweep: the kubelet removed its pods
// first.
type sweeper struct {
	pipe *os.File // write end
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// sweepScript runs with NODE_DIR, BRIDGE and CGROUP_ROOT set; none is
// in its command line, so no process it looks for is itself.
const sweepScript = `trap '' INT TERM HUP
while read -r _; do :; done
echo "sweep of $NODE_DIR at $(date +%T.%N)"
kill_node() {
	for d in /proc/[0-9]*; do
		args=$( (tr '\0' ' ' < "$d/cmdline") 2>/dev/null ) || continue
		case "$args" in *"$NODE_DIR/"*) echo "kill ${d#/proc/}: $args"; kill -KILL "${d#/proc/}" 2>/dev/null;; esac
	done
	for f in $(find /sys/fs/cgroup/*/"$CGROUP_ROOT" /sys/fs/cgroup/"$CGROUP_ROOT" -name cgroup.procs 2>/dev/null); do
		for p in $(cat "$f" 2>/dev/null); do echo "kill $p in $f"; kill -KILL "$p" 2>/dev/null; done
	done
}
for i in 1 2 3 4 5 6 7 8 9 10; do
	kill_node
	left=$(cat /sys/fs/cgroup/*/"$CGROUP_ROOT"/cgroup.procs /sys/fs/cgroup/*/"$CGROUP_ROOT"/*/cgroup.procs 2>/dev/null | head -1)
	[ -z "$left" ] && break
	sleep 0.2
done
# The sockets of shims that were killed (containerd 1.6 puts them in
# /run/containerd/s, named by a hash of its address, namespace and id).
for task in "$NODE_DIR"/state/io.containerd.runtime.v2.task/*/*; do
	[ -d "$task" ] || continue
	id=${task##*/}; ns=${task%/*}; ns=${ns##*/}
	sock=/run/containerd/s/$(printf '%s' "$NODE_DIR/containerd.sock/$ns/$id" | sha256sum | cut -d' ' -f1)
	[ -S "$sock" ] && { echo "remove $sock"; rm -f "$sock"; }
done
# The CNI library's cached results of the pods' networks (a network
# torn down by CNI DEL has none left).
for sandbox in "$NODE_DIR"/state/io.containerd.grpc.v1.cri/sandboxes/*; do
	[ -d "$sandbox" ] || continue
	for r in /var/lib/cni/results/*-"${sandbox##*/}"-*; do
		[ -f "$r" ] && { echo "remove $r"; rm -f "$r"; }
	done
done
# Deepest first, each once, lazily: a mount still busy goes when its
# last user does.
awk '{print $5}' /proc/self/mountinfo | grep "^$NODE_DIR/" | sort -r | uniq | while read -r m; do
	echo "unmount $m"; umount -l "$m" 2>/dev/null
done
if ip link show "$BRIDGE" >/dev/null 2>&1; then echo "delete bridge $BRIDGE"; ip link delete "$BRIDGE"; fi
# The pods' network rules (RestrictPods), if a test left them.
if command -v nft >/dev/null 2>&1 && nft list table inet "kubetest_$BRIDGE" >/dev/null 2>&1; then
	echo "delete nftables table kubetest_$BRIDGE"; nft delete table inet "kubetest_$BRIDGE"
fi
for root in /sys/fs/cgroup/*/"$CGROUP_ROOT" /sys/fs/cgroup/"$CGROUP_ROOT"; do
	[ -d "$root" ] && find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
done
for l in /var/log/containers/*; do
	case "$(readlink "$l" 2>/dev/null)" in "$NODE_DIR/"*) rm -f "$l";; esac
done
if [ -f "$NODE_DIR/kernel-tunables.saved" ]; then
	while read -r path value; do echo "$value" > "$path"; done < "$NODE_DIR/kernel-tunables.saved"
	rm -f "$NODE_DIR/kernel-tunables.saved"
fi
# The host folders a kubelet, containerd and the CNI plugins make where
# they were told nothing else (the kubelet's device plugin socket has a
# fixed path): gone when no other node uses them, and only if empty.
# (A process just killed is a zombie until reaped: it does not count.)
running() { ps -C "$1" -o stat=,pid= | awk '$1 !~ /^Z/ {print $2}' | grep .; }
if others=$(running kubelet); then
	echo "host folders of the kubelet kept: kubelet $others runs"
else
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet /var/log/containers 2>/dev/null
fi
if others=$(running containerd); then
	echo "host folders of containerd kept: containerd $others runs"
else
	rmdir /run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni 2>/dev/null
fi
# The folder holds the images (hundreds of megabytes): it goes too,
# unless something is still mounted there.
if awk '{print $5}' /proc/self/mountinfo | grep -q "^$NODE_DIR/"; then
	echo "folder kept: still mounted under it"
else
	case "$NODE_DIR" in */ktn-*) rm -rf "$NODE_DIR";; esac
fi
echo "sweep done at $(date +%T.%N)"`

func startSweeper(n *RealNode) (*sweeper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("node sweeper: %w", err)
	}
	defer r.Close() // the sweeper has its own copy
	s := &sweeper{pipe: w, done: make(chan struct{}), log: filepath.Join(n.logDir, "node-sweep.log")}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("node sweeper: %w", err)
	}
	defer logf.Close()
	s.cmd = exec.Command("/bin/bash", "-c", sweepScript)
	s.cmd.Env = append(os.Environ(), "NODE_DIR="+n.dir, "BRIDGE="+n.bridge, "CGROUP_ROOT="+n.cgroupRoot)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = r, logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("node sweeper: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// close sets the sweep off and waits until it is done.
func (s *sweeper) close() {
	s.pipe.Close()
	<-s.done
}

// makeCgroupRoots makes the node's cgroup in every hierarchy: the
// kubelet refuses a cgroupRoot that does not exist. A cpuset group
// starts with no CPUs and no memory nodes, so it gets its parent's.
func makeCgroupRoots(name string) error {
	hierarchies, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		hierarchies, v2 = []string{"/sys/fs/cgroup"}, true // one hierarchy
	}
	for _, h := range hierarchies {
		if st, err := os.Stat(h); err != nil || !st.IsDir() {
			continue
		}
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("real node cgroup %s: %w", dir, err)
		}
		if v2 {
			// The kubelet's groups below get the controllers the root
			// has only through this group. (The test machines run cgroup
			// v1: this is untried.)
			if ctrls, err := os.ReadFile(filepath.Join(h, "cgroup.subtree_control")); err == nil {
				var plus []string
				for _, c := range strings.Fields(string(ctrls)) {
					plus = append(plus, "+"+c)
				}
				_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(plus, " ")), 0o644)
			}
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("real node cgroup %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// mountsUnder lists the mount points under dir (or an error's text).
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out
}

// Leftovers lists what of the node is still on the host: processes
// running its programs, mounts under its folder, its bridge, the CNI
// results cached for its network, its cgroups.
// After Close it is empty; tests of the harness check that.
func (n *RealNode) Leftovers() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), n.dir+"/") {
			out = append(out, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	for _, m := range mountsUnder(n.dir) {
		out = append(out, "mount "+m)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge)); err == nil {
		out = append(out, "network device "+n.bridge)
	}
	if results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.bridge+"-*")); len(results) > 0 {
		out = append(out, "CNI results "+strings.Join(results, " "))
	}
	if groups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", n.cgroupRoot)); len(groups) > 0 {
		out = append(out, "cgroups "+strings.Join(groups, " "))
	}
	if _, err := os.Stat(filepath.Join(n.dir, "kernel-tunables.saved")); err == nil {
		out = append(out, "kernel settings not put back")
	}
	return out
}
