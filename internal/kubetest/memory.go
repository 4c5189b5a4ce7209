package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memCgroups enforces containers' memory limits where the host lets the
// test make memory cgroups (root, cgroup v1 or v2): each attempt of a
// container with limits.memory runs in a group of its own with that
// limit, so the kernel OOM-kills it past the limit and the kubelet
// reports OOMKilled, as on a node. Without such cgroups memory limits
// are not enforced.
type memCgroups struct {
	root string // the kubelet's parent group
	v2   bool
}

// findMemCgroups makes the kubelet's parent group under the test's own
// memory cgroup, or returns nil when that cannot be done here.
func findMemCgroups(name string) *memCgroups {
	own, v2, err := ownMemCgroup()
	if err != nil {
		return nil
	}
	root := filepath.Join(own, name)
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil
	}
	m := &memCgroups{root: root, v2: v2}
	if v2 {
		// Children get a memory controller only when the parent hands it on.
		_ = os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+memory"), 0o644)
	}
	g, err := m.create("probe", 64<<20)
	if err != nil {
		os.Remove(root)
		return nil
	}
	g.remove()
	return m
}

// ownMemCgroup finds the folder of the memory cgroup this process is in.
func ownMemCgroup() (string, bool, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	var v1Path, v2Path string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1Path = parts[2]
			}
		}
	}
	if v1Path != "" {
		if dir := filepath.Join("/sys/fs/cgroup/memory", v1Path); exists(filepath.Join(dir, "memory.limit_in_bytes")) {
			return dir, false, nil
		}
	}
	for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		dir := filepath.Join(mnt, v2Path)
		if ctl, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers")); err == nil && strings.Contains(string(ctl), "memory") {
			return dir, true, nil
		}
	}
	return "", false, fmt.Errorf("no memory cgroup")
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// memCgroup is one attempt's group.
type memCgroup struct {
	dir string
	v2  bool
}

// create makes a group named name limited to limit bytes.
func (m *memCgroups) create(name string, limit int64) (*memCgroup, error) {
	dir := filepath.Join(m.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	g := &memCgroup{dir: dir, v2: m.v2}
	file := "memory.limit_in_bytes"
	if m.v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		g.remove()
		return nil, fmt.Errorf("memory cgroup limit: %w", err)
	}
	if !m.v2 {
		// Without swap accounting this file is absent; with it, the limit
		// must cover swap too or the kernel swaps instead of killing.
		_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644)
	}
	return g, nil
}

// procs is the file a process writes its pid to, to enter the group.
func (g *memCgroup) procs() string { return filepath.Join(g.dir, "cgroup.procs") }

// oomKilled says whether the kernel OOM-killed a process of the group.
func (g *memCgroup) oomKilled() bool {
	file := "memory.oom_control"
	if g.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v > 0
		}
	}
	return false
}

// remove deletes the group; its processes must be gone.
func (g *memCgroup) remove() { _ = os.Remove(g.dir) }

// close removes the kubelet's parent group.
func (m *memCgroups) close() {
	if m != nil {
		_ = os.Remove(m.root)
	}
}
