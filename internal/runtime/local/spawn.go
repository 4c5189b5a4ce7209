//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/fds"
	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/process"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/sandbox"
)

// start builds and starts a confined sandbox in its server directory,
// which exists. Everything berth hands the sandbox goes as a descriptor
// (workspace, listening socket, log), so the init, running as the
// sandbox's uid, needs no path of berth's. The init gets those and its
// stdio, nothing else: descriptors berth inherited from whoever started it
// are made close-on-exec first (Go's own are already).
func (c *confinement) start(id string, spec runtime.Spec, lim Limits, probe bool, img *image.Image) (*proc, error) {
	r := c.r
	dir := r.dir(id)
	lims, err := c.limitsFor(spec)
	if err != nil {
		return nil, err
	}
	slot, err := c.uids.claim(dir)
	if err != nil {
		return nil, err
	}
	uid := slot.uid(c.uids)
	// seed runs only for a new volume: the sandbox's first start.
	fresh := false
	seed := func(ws string) error {
		fresh = true
		if img != nil {
			return os.Mkdir(ws, 0o755)
		}
		return r.seedWorkspace(spec.ImageTag, ws)
	}
	space := r.space
	if probe {
		// berth's own check, removed at once, may use the reserve: a
		// berth short of space still starts and serves its sandboxes.
		space = space.unreserved()
	}
	if err := r.ensureVolume(space, dir, lim.DiskBytes, uid, seed); err != nil {
		return nil, err
	}
	logFile, err := openLogDetached(filepath.Join(dir, volumeDir, berthSubdir))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	ws, err := detachedMount(r.workspacePath(id), "workspace", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	ups, err := upstreamsMount(spec.Upstreams)
	if err != nil {
		return nil, err
	}
	defer ups.Close()
	listener, err := r.listen(id)
	if err != nil {
		return nil, err
	}
	defer listener.Close()
	cgroups, err := c.cgroup.create(id, lims)
	if err != nil {
		return nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		removeCgroups(cgroups)
		return nil, err
	}
	defer specW.Close()
	var rootR, rootW *os.File
	if img != nil {
		if rootR, rootW, err = socketPair(); err != nil {
			specR.Close()
			removeCgroups(cgroups)
			return nil, err
		}
		defer rootW.Close()
	}
	cmd := exec.Command("/proc/self/fd/"+strconv.Itoa(sandbox.BinaryFD), sandbox.InitCommand)
	cmd.Args[0] = "berth-agent"
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	files := make([]*os.File, sandbox.RootFD-2)
	files[sandbox.SpecFD-3], files[sandbox.WorkspaceFD-3], files[sandbox.ListenerFD-3] = specR, ws, listener
	files[sandbox.BinaryFD-3], files[sandbox.UpstreamsFD-3] = c.binary, ups
	if rootR != nil {
		files[sandbox.RootFD-3] = rootR
	} else {
		files = files[:sandbox.RootFD-3]
	}
	cmd.ExtraFiles = files
	cmd.SysProcAttr = c.sysProcAttr(uid)
	if err := fds.CloseOnExecFrom(3); err != nil {
		removeCgroups(cgroups)
		return nil, err
	}
	err = cmd.Start()
	specR.Close()
	if rootR != nil {
		rootR.Close()
	}
	if err != nil {
		removeCgroups(cgroups)
		return nil, fmt.Errorf("start sandbox init: %w", err)
	}
	p := r.track(id, cmd, cgroups)
	// The init waits for its spec before it runs anything, so it is in
	// its cgroups before any of the sandbox's code is.
	if err := attachCgroups(cgroups, cmd.Process.Pid); err != nil {
		return p, r.abort(p, err)
	}
	if img != nil {
		// Its user namespace exists now, mapped: the image's layers are
		// idmapped through it.
		if err := c.sendImageRoot(cmd.Process.Pid, img, filepath.Join(dir, volumeDir), uid, rootW); err != nil {
			return p, r.abort(p, err)
		}
	}
	is := c.initSpec(spec, lim, probe, img)
	if fresh && img != nil {
		// A non-root image user can write its workspace: the image's
		// own idea of who that is, resolved inside.
		is.WorkspaceOwner = img.Config.User
		// And it starts with what the image has there: what a build
		// left in its workspace, say.
		is.SeedWorkspace = true
	}
	b, _ := json.Marshal(is)
	if _, err := specW.Write(b); err != nil {
		return p, r.abort(p, fmt.Errorf("send sandbox spec: %w", err))
	}
	specW.Close()
	if err := r.writeRecord(id, p.record); err != nil {
		return p, r.abort(p, err)
	}
	return p, nil
}

// sendImageRoot makes the root filesystem of the sandbox whose init is
// pid and sends it to the init on sock.
func (c *confinement) sendImageRoot(pid int, img *image.Image, volume string, uid int, sock *os.File) error {
	userns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the sandbox's user namespace: %w", err)
	}
	defer unix.Close(userns)
	root, err := c.r.imageRootfs(img, volume, userns, uid)
	if err != nil {
		return err
	}
	defer root.Close()
	return sendRoot(sock, root)
}

// socketPair is a connected pair of unix sockets that keep messages
// apart, close-on-exec.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "root-r"), os.NewFile(uintptr(fds[1]), "root-w"), nil
}

// detachedMount clones a directory (the workspace) as a detached mount
// with attrs set, which the init attaches in the sandbox's mount
// namespace: a descriptor of a mount in berth's own
// namespace could not be bound there, and a path would have to be
// reachable by the sandbox's uid.
func detachedMount(path, what string, attrs uint64) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("clone %s mount: %w", what, err)
	}
	attr := unix.MountAttr{Attr_set: attrs}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s mount attributes: %w", what, err)
	}
	return os.NewFile(uintptr(fd), what), nil
}

// startUnconfined starts the agent as a plain child of berth's user.
func (r *Runtime) startUnconfined(id string, spec runtime.Spec) (*proc, error) {
	ws := r.workspacePath(id)
	if _, err := os.Lstat(ws); errors.Is(err, os.ErrNotExist) {
		// Unconfined workspaces are plain directories, bounded by
		// nothing: only the reserve is kept at their start.
		if err := r.space.check(0, "a new sandbox"); err != nil {
			return nil, err
		}
		if err := r.seedWorkspace(spec.ImageTag, ws); err != nil {
			return nil, err
		}
	}
	logFile, err := openLog(r.logPath(id))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	listener, err := r.listen(id)
	if err != nil {
		return nil, err
	}
	defer listener.Close()
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer tokR.Close()
	tokW.WriteString(spec.AgentToken + "\n")
	tokW.Close()
	upDir, err := r.writeUpstreams(id, spec.Upstreams)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.agent,
		"--listen", "fd:"+strconv.Itoa(sandbox.AgentListenerFD),
		"--token-fd", strconv.Itoa(sandbox.AgentTokenFD),
		"--workspace", ws,
		"--upstreams-dir", upDir,
		"--isolation", r.describe(),
	)
	cmd.Dir = ws
	cmd.Env = sandboxEnv(ws, spec.Env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{listener, tokR}
	// Its own session: the agent must not die with the orchestrator's
	// terminal or process group, and Delete signals the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := fds.CloseOnExecFrom(3); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	p := r.track(id, cmd, nil)
	if err := r.writeRecord(id, p.record); err != nil {
		return p, r.abort(p, err)
	}
	return p, nil
}

// track records a started process and reaps it when it exits.
func (r *Runtime) track(id string, cmd *exec.Cmd, cgroups []string) *proc {
	p := &proc{id: id, own: true, done: make(chan struct{}), record: record{ID: process.ID{Pid: cmd.Process.Pid}, Cgroups: cgroups}}
	if pid, err := process.Of(p.Pid); err == nil {
		p.ID = pid
	}
	r.mu.Lock()
	r.procs[id] = p
	r.mu.Unlock()
	go func() {
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = &ws
		}
		close(p.done)
		r.exited(p)
	}()
	return p
}

// abort kills a sandbox whose start failed halfway.
func (r *Runtime) abort(p *proc, err error) error {
	r.mu.Lock()
	p.stopping = true
	r.mu.Unlock()
	syscall.Kill(p.Pid, syscall.SIGKILL)
	<-p.done
	return err
}

// listen makes the agent's listening socket, in a directory only berth
// can reach, and returns it as a descriptor to hand over. The socket
// stays bound after berth lets go of it: the agent holds it.
func (r *Runtime) listen(id string) (*os.File, error) {
	path := r.socket(id)
	if dir := filepath.Dir(path); dir != r.dir(id) {
		if err := mkdirPrivate(dir, 0o700); err != nil {
			return nil, fmt.Errorf("socket dir: %w", err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	defer unix.Close(dir)
	// Bound through the directory's descriptor, so that the address the
	// socket keeps, which whoever holds it reads with getsockname, names
	// no host path.
	name := "/proc/self/fd/" + strconv.Itoa(dir) + "/" + filepath.Base(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return ln.File()
}

func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	return f, nil
}
