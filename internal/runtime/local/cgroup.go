//go:build linux

package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// limits are one sandbox's resource limits; zero means unlimited.
type limits struct {
	memoryBytes int64
	pids        int64
	milliCPU    int64
}

// cgroupHost knows where this host's cgroups are and makes one group per
// sandbox under berth's own: under each v1 controller hierarchy (memory,
// pids, cpu) or once in the v2 unified hierarchy.
type cgroupHost struct {
	v2 bool
	// parents are the directories that hold berth's sandbox groups, one
	// per v1 controller or the single v2 one.
	parents []string
}

var v1Controllers = []string{"memory", "pids", "cpu"}

// findCgroups locates the hierarchies with the memory, pids and cpu
// controllers and prepares a parent group for sandboxes named after
// group (unique per berth data directory). It prefers v2 when the unified
// hierarchy has the controllers.
func findCgroups(group string) (*cgroupHost, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	if m, ok := mounts["2"]; ok {
		if ctrl, err := os.ReadFile(filepath.Join(m.dir, "cgroup.controllers")); err == nil && hasAll(strings.Fields(string(ctrl)), v1Controllers) {
			return prepareV2(m.under(own[""]), group)
		}
	}
	h := &cgroupHost{}
	var missing []string
	for _, c := range v1Controllers {
		m, ok := mounts[c]
		if !ok {
			missing = append(missing, c)
			continue
		}
		parent := filepath.Join(m.under(own[c]), group)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", parent, err)
		}
		h.parents = append(h.parents, parent)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no cgroup hierarchy has the %s controller(s) (neither v1 nor v2)", strings.Join(missing, ", "))
	}
	// The memory hierarchy must account children in their parents, or a
	// limit on berth's group would not hold.
	if b, err := os.ReadFile(filepath.Join(h.parents[0], "memory.use_hierarchy")); err == nil && strings.TrimSpace(string(b)) == "0" {
		if err := os.WriteFile(filepath.Join(h.parents[0], "memory.use_hierarchy"), []byte("1"), 0); err != nil {
			return nil, fmt.Errorf("cgroup v1 memory.use_hierarchy: %w", err)
		}
	}
	return h, nil
}

// prepareV2 makes <own>/<group> a parent whose children get the memory,
// pids and cpu controllers. A v2 group with processes may not hand
// controllers down, so when berth's own group is not the root, berth first
// moves itself into a leaf beside its sandboxes' parent.
func prepareV2(own, group string) (*cgroupHost, error) {
	enable := "+memory +pids +cpu"
	if err := os.WriteFile(filepath.Join(own, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		if !errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w (berth needs a delegated cgroup)", own, err)
		}
		leaf := filepath.Join(own, "berth-server")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: move berth into %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(own, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", own, err)
		}
	}
	parent := filepath.Join(own, group)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", parent, err)
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", parent, err)
	}
	return &cgroupHost{v2: true, parents: []string{parent}}, nil
}

// release removes berth's parent groups if no sandbox group is left in
// them, so a data directory that is gone leaves no group behind.
func (h *cgroupHost) release() {
	for _, p := range h.parents {
		os.Remove(p) // fails, harmlessly, while a sandbox's group is there
	}
}

// dirs are the sandbox's group directories.
func (h *cgroupHost) dirs(id string) []string {
	var dirs []string
	for _, p := range h.parents {
		dirs = append(dirs, filepath.Join(p, id))
	}
	return dirs
}

// create makes the sandbox's groups with its limits and returns their
// directories.
func (h *cgroupHost) create(id string, l limits) ([]string, error) {
	dirs := h.dirs(id)
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("cgroup for sandbox %s: %w", id, err)
		}
	}
	if err := h.apply(dirs, l); err != nil {
		removeCgroups(dirs)
		return nil, err
	}
	return dirs, nil
}

func (h *cgroupHost) apply(dirs []string, l limits) error {
	set := func(file, value string) error {
		for _, d := range dirs {
			p := filepath.Join(d, file)
			if _, err := os.Stat(p); err != nil {
				continue // the file belongs to another controller's group
			}
			if err := os.WriteFile(p, []byte(value), 0); err != nil {
				return fmt.Errorf("cgroup %s = %s: %w", p, value, err)
			}
			return nil
		}
		return fmt.Errorf("cgroup file %s not found under %s", file, strings.Join(dirs, ", "))
	}
	limit := func(n int64, unlimited string) string {
		if n <= 0 {
			return unlimited
		}
		return strconv.FormatInt(n, 10)
	}
	const period = 100000
	if h.v2 {
		quota := "max"
		if l.milliCPU > 0 {
			quota = strconv.FormatInt(l.milliCPU*period/1000, 10)
		}
		return errors.Join(
			set("memory.max", limit(l.memoryBytes, "max")),
			set("memory.swap.max", "0"),
			set("pids.max", limit(l.pids, "max")),
			set("cpu.max", quota+" "+strconv.Itoa(period)),
		)
	}
	quota := "-1"
	if l.milliCPU > 0 {
		quota = strconv.FormatInt(l.milliCPU*period/1000, 10)
	}
	errs := []error{
		set("memory.limit_in_bytes", limit(l.memoryBytes, "-1")),
		set("pids.max", limit(l.pids, "max")),
		set("cpu.cfs_period_us", strconv.Itoa(period)),
		set("cpu.cfs_quota_us", quota),
	}
	// Without swap accounting the memory limit holds for RAM only.
	if l.memoryBytes > 0 {
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
				errs = append(errs, set("memory.memsw.limit_in_bytes", limit(l.memoryBytes, "-1")))
			}
		}
	}
	return errors.Join(errs...)
}

// attach moves pid into every one of the sandbox's groups.
func attachCgroups(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// cgroupPids lists the processes left in the sandbox's groups.
func cgroupPids(dirs []string) []int {
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// oomKills counts the processes the kernel killed for the sandbox's
// memory limit.
func oomKills(dirs []string) int {
	for _, d := range dirs {
		for _, file := range []string{"memory.events", "memory.oom_control"} {
			b, err := os.ReadFile(filepath.Join(d, file))
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				if n, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
					v, _ := strconv.Atoi(n)
					return v
				}
			}
		}
	}
	return 0
}

// removeCgroups removes the sandbox's groups, which must be empty.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

type cgroupMount struct{ dir, root string }

// under is the directory of the group at path (as /proc/self/cgroup
// names it) within this mount, whose root may itself be a subgroup.
func (m cgroupMount) under(path string) string {
	rel := strings.TrimPrefix(path, m.root)
	return filepath.Join(m.dir, rel)
}

// cgroupMounts maps each v1 controller, and "2" for the unified
// hierarchy, to where it is mounted.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || len(fields) < sep+4 || len(fields) < 5 {
			continue
		}
		m := cgroupMount{dir: fields[4], root: fields[3]}
		switch fields[sep+1] {
		case "cgroup2":
			out["2"] = m
		case "cgroup":
			for _, opt := range strings.Split(fields[sep+3], ",") {
				if slices.Contains(v1Controllers, opt) {
					out[opt] = m
				}
			}
		}
	}
	return out, sc.Err()
}

// ownCgroups maps each controller ("" for v2) to this process's group.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
