package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/fds"
)

// maxSpecBytes bounds the spec read from the runtime: it is berth's own
// data, but a reader should never be unbounded.
const maxSpecBytes = 1 << 20

// newRoot is where the sandbox's root is assembled before pivot_root. A
// tmpfs mounted there in the sandbox's own mount namespace hides the
// host's /tmp from the sandbox and needs no directory of berth's: the
// init runs as the sandbox's uid, which cannot reach berth's data
// directory, so everything of berth's arrives as a descriptor.
const newRoot = "/tmp"

// Init runs the sandbox's init: build the sandbox from the spec on
// SpecFD, start the agent and supervise it. It returns only on failure
// (the process exits with the agent's status otherwise). Call it from
// main, first thing, when os.Args[1] is InitCommand.
func Init(stderr io.Writer) error {
	// Only the descriptors berth hands over go further, each no further
	// than this process: anything else berth inherited from whoever
	// started it would otherwise reach the agent and every command.
	if err := fds.CloseInherited(SpecFD, WorkspaceFD, ListenerFD, BinaryFD, UpstreamsFD, RootFD); err != nil {
		return err
	}
	// Privileges are dropped per thread and inherited by children forked
	// from that thread: keep everything on the main thread.
	runtime.LockOSThread()
	if os.Getpid() != 1 {
		return errors.New("sandbox init must run as pid 1 of a new pid namespace (it is started by berth's local runtime)")
	}
	// Executed from it already; /proc/self/exe keeps the binary.
	unix.Close(BinaryFD)
	spec, err := readSpec()
	if err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := buildRoot(spec); err != nil {
		return err
	}
	if spec.ResolvConf != "" {
		if err := setResolvConf(spec.ResolvConf, spec.ImageRoot); err != nil {
			return err
		}
	}
	if spec.WorkspaceOwner != "" {
		// The image's user may not exist as it says: its commands fail
		// then, saying so, and the workspace stays root's.
		if err := giveWorkspace(spec.WorkspaceOwner); err != nil {
			fmt.Fprintf(stderr, "sandbox: workspace left to root: %v\n", err)
		}
	}
	if spec.Probe {
		if err := probeChecks(spec); err != nil {
			return err
		}
		os.Exit(0)
	}
	if err := dropPrivileges(spec.KeepCaps); err != nil {
		return err
	}
	agent, err := startAgent(spec.Agent)
	if err != nil {
		return err
	}
	status := supervise(agent)
	fmt.Fprintf(stderr, "sandbox: agent %s\n", describeExit(status))
	os.Exit(exitCode(status))
	return nil
}

func readSpec() (Spec, error) {
	f := os.NewFile(SpecFD, "spec")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSpecBytes))
	if err != nil {
		return Spec{}, fmt.Errorf("read sandbox spec: %w", err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return Spec{}, fmt.Errorf("sandbox spec: %w", err)
	}
	return spec, nil
}

// probeChecks confirms from inside a probe sandbox what berth promises:
// the loopback answers and the host's root is gone.
func probeChecks(spec Spec) error {
	if _, err := os.Stat("/workspace"); err != nil {
		return fmt.Errorf("probe: workspace missing: %w", err)
	}
	for _, dir := range []string{"/", spec.UpstreamsDir} {
		if dir == "" {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		if st.Flags&unix.ST_RDONLY == 0 {
			return fmt.Errorf("probe: %s is writable in the sandbox", dir)
		}
	}
	return nil
}
