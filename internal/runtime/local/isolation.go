//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/sandbox"
)

// confinement is the host side of full isolation: the uid blocks, the
// cgroups and what every sandbox's init is told to build.
type confinement struct {
	r      *Runtime
	uids   uidSlots
	cgroup *cgroupHost
	binary *os.File // the agent binary, sealed in memory
}

// cloneFlags are the namespaces of every confined sandbox.
const cloneFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// newConfinement checks that berth may confine sandboxes here, prepares
// the uid registry and cgroups, and starts a probe sandbox that builds
// everything a real one does, so that a kernel or host that refuses any
// part fails now, at start, with the reason.
func newConfinement(r *Runtime) (*confinement, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("berth runs as uid %d, not root: confining a sandbox needs root to give it a uid block of its own, cgroups and a size-limited volume; run berth as root (as a system service)", os.Geteuid())
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return nil, errors.New("user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0): set it to a positive number, e.g. sysctl -w user.max_user_namespaces=15000")
	}
	c := &confinement{r: r, uids: uidSlots{
		dir:   orDefault(r.opts.UIDRegistry, DefaultUIDRegistry),
		base:  orDefaultInt(r.opts.UIDBase, DefaultUIDBase),
		slots: orDefaultInt(r.opts.UIDSlots, DefaultUIDSlots),
	}}
	if err := c.uids.prepare(); err != nil {
		return nil, err
	}
	var err error
	if c.binary, err = sealedCopy(r.agent); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(r.opts.DataDir))
	if c.cgroup, err = findCgroups("berth-" + hex.EncodeToString(sum[:6])); err != nil {
		c.binary.Close()
		return nil, fmt.Errorf("cgroups for sandbox limits: %w", err)
	}
	// The probe is a sandbox like any other: removing it needs the
	// confinement in place.
	r.confine = c
	err = c.probe()
	r.confine = nil
	if err != nil {
		c.binary.Close()
		return nil, err
	}
	return c, nil
}

// release lets go of what the confinement holds in berth's process.
func (c *confinement) release() {
	c.cgroup.release()
	c.binary.Close()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDefaultInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// probe starts a throw-away sandbox with everything a real one gets (a
// uid block, cgroups, a volume, every namespace, the whole filesystem
// build) whose init checks the result and exits without an agent.
func (c *confinement) probe() error {
	r := c.r
	// Unique per probe: two runtimes of one process (replicas in a test)
	// may probe on one data directory at once.
	id := "probe-" + fmt.Sprint(os.Getpid()) + "-" + rand.Text()[:8]
	dir := r.dir(id)
	defer func() {
		r.removeSandbox(context.Background(), id)
	}()
	if err := mkdirPrivate(dir, 0o700); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	lim := r.opts.Limits
	lim.DiskBytes = 32 << 20
	p, err := c.start(id, runtime.Spec{ServerID: id}, lim, true, nil)
	if err != nil {
		return fmt.Errorf("probe sandbox: %w", err)
	}
	r.mu.Lock()
	p.stopping = true // its exit is the answer, not news
	r.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		syscall.Kill(p.Pid, syscall.SIGKILL)
		<-p.done
		return errors.New("probe sandbox: no answer within 30s")
	}
	if p.status != nil && p.status.Exited() && p.status.ExitStatus() == 0 {
		return nil
	}
	log, _ := readTail(r.logPath(id))
	return fmt.Errorf("probe sandbox failed (%s): %s", p.describe(), strings.TrimSpace(string(bytes.TrimSpace(log))))
}

func (c *confinement) describe() string {
	l := c.r.opts.Limits
	cpu := "unlimited CPU"
	if l.MilliCPU > 0 {
		cpu = fmt.Sprintf("%s CPU", resource.NewMilliQuantity(l.MilliCPU, resource.DecimalSI))
	}
	cg := "cgroup v1"
	if c.cgroup.v2 {
		cg = "cgroup v2"
	}
	return fmt.Sprintf("full: each sandbox in its own user, mount, pid, network, IPC, UTS and cgroup namespaces, "+
		"as a block of %d host uids no other live sandbox has (root inside is unprivileged outside); "+
		"it sees only its own processes, has only a loopback network (no route to the host, berth, its database or other sandboxes), "+
		"sees the host's %s read-only (host, base and templates) or its OCI image's files over a writable layer on its own volume, "+
		"and nothing else of the host (private /tmp, /dev/shm, /dev, /proc); "+
		"limits (%s): %s memory, %d processes, %s, a %s workspace volume, %s each for /tmp and /dev/shm; "+
		"no nested user namespaces, a container runtime's default capabilities, no_new_privs",
		idsPerSandbox, strings.Join(c.r.opts.ReadOnlyPaths, " "), cg,
		bytesQ(l.MemoryBytes), l.Pids, cpu, bytesQ(l.DiskBytes), bytesQ(l.TmpBytes))
}

func bytesQ(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// limitsFor applies a start request's resources over the defaults.
func (c *confinement) limitsFor(spec runtime.Spec) (limits, error) {
	l := c.r.opts.Limits
	out := limits{memoryBytes: l.MemoryBytes, pids: l.Pids, milliCPU: l.MilliCPU}
	if spec.Resources.Memory != "" {
		q, err := resource.ParseQuantity(spec.Resources.Memory)
		if err != nil || q.Sign() <= 0 {
			return limits{}, fmt.Errorf("resources.memory %q: want a positive quantity such as 512Mi or 2Gi", spec.Resources.Memory)
		}
		out.memoryBytes = q.Value()
	}
	if spec.Resources.CPU != "" {
		q, err := resource.ParseQuantity(spec.Resources.CPU)
		if err != nil || q.Sign() <= 0 {
			return limits{}, fmt.Errorf("resources.cpu %q: want a positive quantity such as 500m or 2", spec.Resources.CPU)
		}
		out.milliCPU = q.MilliValue()
	}
	return out, nil
}

// initSpec is what the sandbox's init builds.
func (c *confinement) initSpec(spec runtime.Spec, lim Limits, probe bool, img *image.Image) sandbox.Spec {
	out := sandbox.Spec{
		Hostname:     "sandbox-" + truncate(spec.ServerID, 40),
		TmpBytes:     lim.TmpBytes,
		KeepCaps:     sandbox.DefaultCaps,
		UpstreamsDir: runtime.UpstreamsDir,
		Probe:        probe,
		Agent: sandbox.Agent{
			Args: append([]string{"--workspace", sandbox.WorkspaceDir, "--upstreams-dir", runtime.UpstreamsDir,
				"--isolation", c.describe()}, commandDefaults(img)...),
			Env:   sandboxEnv(sandbox.WorkspaceDir, c.r.withProxyEnv(imageEnv(img, spec.Env))),
			Token: spec.AgentToken,
		},
	}
	if c.r.egress != nil && !probe {
		out.ResolvConf = resolvConfText
	}
	if img != nil {
		out.ImageRoot = true
	} else {
		out.ReadOnly = c.r.opts.ReadOnlyPaths
		out.Hide = append([]string{c.r.opts.DataDir}, c.r.opts.HidePaths...)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// sysProcAttr puts the init in every namespace, as root of its user
// namespace mapped to the sandbox's uid block.
func (c *confinement) sysProcAttr(uid int) *syscall.SysProcAttr {
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: idsPerSandbox}}
	return &syscall.SysProcAttr{
		Setsid:                     true,
		Cloneflags:                 cloneFlags,
		UidMappings:                ids,
		GidMappings:                ids,
		GidMappingsEnableSetgroups: true,
		// Becoming root inside the namespace is what makes the process
		// the block's first uid on the host.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
}

// workspace and logs of a sandbox, by isolation mode.
func (r *Runtime) workspacePath(id string) string {
	if r.opts.Isolation == IsolationFull {
		return filepath.Join(r.dir(id), volumeDir, wsSubdir)
	}
	return filepath.Join(r.dir(id), "workspace")
}

func (r *Runtime) logPath(id string) string {
	if r.opts.Isolation == IsolationFull {
		return filepath.Join(r.dir(id), volumeDir, berthSubdir, agentLog)
	}
	return filepath.Join(r.dir(id), agentLog)
}
