// Package sandbox owns the inside of a local sandbox's boundary: the Spec
// the local runtime hands a sandbox's first process, and that process,
// which runs as pid 1 in fresh user, mount, pid, network, IPC, UTS and
// cgroup namespaces. It builds the sandbox's root filesystem (the host
// system read-only, the workspace read-write, private /tmp, /dev/shm,
// /dev and /proc, nothing of berth's), brings up a loopback of the
// sandbox's own, drops privileges, then starts berth-agent and reaps every
// orphan until the agent exits. When it exits the kernel kills whatever
// is left in the pid namespace, so nothing a sandbox started outlives it.
//
// The berth-agent binary runs this code when its first argument is
// InitCommand; the local runtime sends the Spec over a pipe. Nothing here
// trusts the sandbox: once the agent has started, every process of the
// sandbox may be hostile, including one that takes over this process, so
// berth keeps everything it must rely on (control files, logs it reads,
// the agent's listening socket's path) outside the sandbox's view.
package sandbox
