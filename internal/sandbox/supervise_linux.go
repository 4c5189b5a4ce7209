package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"

	"golang.org/x/sys/unix"
)

// startAgent starts berth-agent (this same binary) as the init's child,
// with the listener berth made and the token on a pipe.
func startAgent(a Agent) (*os.Process, error) {
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("token pipe: %w", err)
	}
	defer tokR.Close()
	// The token is far smaller than a pipe's buffer, so this never blocks.
	if _, err := tokW.WriteString(a.Token + "\n"); err != nil {
		tokW.Close()
		return nil, fmt.Errorf("token pipe: %w", err)
	}
	tokW.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	listener := os.NewFile(ListenerFD, "listener")
	defer listener.Close()
	args := append([]string{"berth-agent",
		"--listen", "fd:" + strconv.Itoa(AgentListenerFD),
		"--token-fd", strconv.Itoa(AgentTokenFD),
	}, a.Args...)
	files := make([]*os.File, AgentTokenFD+1)
	files[0], files[1], files[2] = null, os.Stdout, os.Stderr
	files[AgentListenerFD], files[AgentTokenFD] = listener, tokR
	p, err := os.StartProcess("/proc/self/exe", args, &os.ProcAttr{Dir: WorkspaceDir, Env: a.Env, Files: files})
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	return p, nil
}

// supervise forwards termination signals to the agent and reaps every
// process that ends up with pid 1 as its parent, until the agent itself
// exits; it returns the agent's wait status.
func supervise(agent *os.Process) unix.WaitStatus {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	for {
		// Reap first: the agent may have exited before Notify ran.
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || pid <= 0 {
				break
			}
			if pid == agent.Pid {
				return ws
			}
		}
		sig := <-sigs
		if sig != unix.SIGCHLD {
			agent.Signal(sig)
		}
	}
}

func describeExit(ws unix.WaitStatus) string {
	switch {
	case ws.Signaled():
		return "was killed by signal " + ws.Signal().String()
	case ws.Exited():
		return "exited with status " + strconv.Itoa(ws.ExitStatus())
	default:
		return "stopped: " + strconv.Itoa(int(ws))
	}
}

// exitCode is the init's exit code for the agent's status, in the shell's
// convention (128 + signal number for a signal).
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
