package local

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// namespaces is the isolation the local runtime applies to every agent,
// decided once by probing what this kernel and user allow.
type namespaces struct {
	flags  uintptr // CLONE_NEW* flags
	userns bool
	asRoot bool   // the orchestrator is root: each sandbox gets its own host uid
	why    string // what could not be done, in plain words
}

// Sandbox uids are taken from a range no distribution hands out to real
// accounts, one per sandbox, so sandboxes cannot read each other's files
// or the host's.
const (
	uidBase  = 200000
	uidRange = 100000
)

func sandboxUID(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return uidBase + int(h.Sum32()%uidRange)
}

// probeNamespaces tries, from the strongest set down, to start the agent
// binary (`--version`) in new namespaces and keeps the first set that
// works. Namespaces for pids and the network are never used: a pid
// namespace would make the agent an init that must reap every orphan, and
// a network namespace starts with loopback down, which would cut the agent
// off from in-sandbox MCP servers on 127.0.0.1.
func probeNamespaces(mode, agent, serversDir string) namespaces {
	const skipped = "no pid or network namespace (the agent would have to act as init, and in-sandbox servers on loopback must stay reachable)"
	if mode == "none" {
		return namespaces{why: "isolation disabled by configuration"}
	}
	root := os.Geteuid() == 0
	candidates := []namespaces{
		{flags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC, userns: true, asRoot: root},
		{flags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC, asRoot: root},
	}
	var errs []string
	for _, c := range candidates {
		if !c.userns && !root {
			continue // mount, uts and ipc namespaces alone need root
		}
		if err := c.try(agent, serversDir); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c.names(), err))
			continue
		}
		c.why = skipped
		return c
	}
	return namespaces{why: "the kernel refused new namespaces (" + strings.Join(errs, "; ") + ")"}
}

// try runs the agent in n from the servers directory, which proves both
// that the kernel allows the namespaces and that the sandbox's uid can
// reach the agent binary and the sandbox directories.
func (n namespaces) try(agent, serversDir string) error {
	cmd := exec.Command(agent, "--version")
	cmd.Dir = serversDir
	cmd.SysProcAttr = n.sysProcAttr("probe")
	cmd.Stdout, cmd.Stderr = nil, nil
	return cmd.Run()
}

func (n namespaces) names() string {
	var parts []string
	for _, f := range []struct {
		flag uintptr
		name string
	}{{syscall.CLONE_NEWUSER, "user"}, {syscall.CLONE_NEWNS, "mount"}, {syscall.CLONE_NEWUTS, "uts"}, {syscall.CLONE_NEWIPC, "ipc"}} {
		if n.flags&f.flag != 0 {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, ", ")
}

// describe says in plain words how sandboxes are isolated.
func (n namespaces) describe() string {
	if n.flags == 0 {
		return "none: sandboxes run as plain processes of the berth user; " + n.why
	}
	s := n.names() + " namespaces"
	if n.userns && n.asRoot {
		s += "; each sandbox runs as its own unprivileged host uid (root only inside its user namespace)"
	} else if n.userns {
		s += "; root inside the sandbox is the berth user outside"
	}
	return s + "; " + n.why
}

func (n namespaces) sysProcAttr(id string) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: true, Cloneflags: n.flags}
	if n.userns {
		host := os.Geteuid()
		hostGID := os.Getegid()
		if n.asRoot {
			host = sandboxUID(id)
			hostGID = host
		}
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: host, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostGID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Becoming root inside the namespace is what makes the process
		// the mapped host uid; without it, it would stay host root with
		// an unmapped (overflow) identity inside.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	}
	return attr
}

// prepare hands the sandbox's files to its host uid when each sandbox has
// its own.
func (n namespaces) prepare(id, dir, ws, tokenFile string) error {
	if !(n.userns && n.asRoot) {
		return nil
	}
	uid := sandboxUID(id)
	if err := os.Chown(dir, uid, uid); err != nil {
		return fmt.Errorf("hand sandbox dir to uid %d: %w", uid, err)
	}
	if err := os.Chown(tokenFile, uid, uid); err != nil {
		return fmt.Errorf("hand token file to uid %d: %w", uid, err)
	}
	return filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// prepareDir hands one directory to the sandbox's host uid when each
// sandbox has its own.
func (n namespaces) prepareDir(id, dir string) error {
	if !(n.userns && n.asRoot) {
		return nil
	}
	uid := sandboxUID(id)
	if err := os.Chown(dir, uid, uid); err != nil {
		return fmt.Errorf("hand %s to uid %d: %w", dir, uid, err)
	}
	return nil
}
