package sandbox

// InitCommand is the first argument that makes berth-agent run as a
// sandbox's init instead of as the agent.
const InitCommand = "sandbox-init"

// Descriptors the runtime passes to the init process. Fixed numbers keep
// both sides in step without naming them on a command line.
const (
	SpecFD      = 3 // read end of a pipe carrying the JSON Spec
	WorkspaceFD = 4 // the workspace as a detached mount (open_tree)
	ListenerFD  = 5 // the agent's listening unix socket, made by berth
	// BinaryFD is a sealed in-memory copy of berth-agent that the init
	// was executed from (and re-executes as the agent, as /proc/self/exe):
	// no path of the host's is needed to start it, and no sandbox can
	// write to the binary every sandbox runs.
	BinaryFD = 6
	// UpstreamsFD is the agent's MCP upstreams directory as a detached
	// read-only mount (open_tree), attached at Spec.UpstreamsDir.
	UpstreamsFD = 7
	// RootFD is a unix socket on which berth sends an image sandbox's
	// root filesystem, one descriptor (SCM_RIGHTS): a detached overlayfs
	// mount of the image's layers (read-only, idmapped onto the sandbox's
	// uid block) under the sandbox's writable upper. Closed for a sandbox
	// of the host system.
	RootFD = 8
)

// Descriptors the init passes to the agent it starts.
const (
	AgentListenerFD = 3
	AgentTokenFD    = 4
)

// Spec is what a sandbox's init needs to build the sandbox and start its
// agent.
type Spec struct {
	// Hostname is the sandbox's name in its UTS namespace.
	Hostname string `json:"hostname"`
	// ReadOnly are host paths made visible at the same place, read-only
	// and without setuid or device files (the host system: /usr, /etc...).
	// Paths that are symlinks on the host (/bin -> usr/bin) are reproduced
	// as symlinks; missing paths are skipped.
	ReadOnly []string `json:"read_only"`
	// Hide are paths covered by an empty read-only directory when they
	// would otherwise be visible through ReadOnly: berth's data directory
	// and secrets that may sit under /etc or /opt.
	Hide []string `json:"hide,omitempty"`
	// TmpBytes bounds /tmp and /dev/shm, each a private tmpfs. Their pages
	// count against the sandbox's memory limit too.
	TmpBytes int64 `json:"tmp_bytes"`
	// KeepCaps are the capabilities (numbers, see capability.h) left in
	// the agent's bounding set; every other one is dropped.
	KeepCaps []uint `json:"keep_caps"`
	// UpstreamsDir is where the mount on UpstreamsFD appears: berth's
	// declarations of the MCP servers the agent proxies.
	UpstreamsDir string `json:"upstreams_dir"`
	// ImageRoot makes the root filesystem the mount berth sends on
	// RootFD instead of a read-only tmpfs with the host paths of
	// ReadOnly (then unused, as is Hide): the root of an OCI image,
	// writable, whose writes land in the sandbox's own volume.
	ImageRoot bool `json:"image_root,omitempty"`
	// WorkspaceOwner, when set, is given /workspace (the directory
	// itself) before the agent starts: an image's USER (name, uid,
	// name:group or uid:gid, looked up in the image's own /etc/passwd
	// and /etc/group), at the sandbox's first start, so that commands
	// run as that user can write their workspace.
	WorkspaceOwner string `json:"workspace_owner,omitempty"`
	// SeedWorkspace, at an image sandbox's first start, copies what the
	// image has at /workspace into the new workspace before it is mounted
	// there (see seedWorkspace).
	SeedWorkspace bool `json:"seed_workspace,omitempty"`
	// ResolvConf, when set, is the sandbox's /etc/resolv.conf: berth's
	// egress resolver on the sandbox's loopback. On the host system's
	// read-only /etc it is mounted over the host's file; an image's own
	// file is replaced.
	ResolvConf string `json:"resolv_conf,omitempty"`
	// Probe makes the init build everything, check it, and exit 0 without
	// starting an agent: the runtime's start-up test of what the kernel
	// allows.
	Probe bool `json:"probe,omitempty"`
	// Agent is how to start berth-agent inside.
	Agent Agent `json:"agent"`
}

// Agent is the agent process inside a sandbox.
type Agent struct {
	// Args follow the program name; the listener and token descriptors
	// are added by the init.
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Token is the agent's bearer token, passed on through a pipe.
	Token string `json:"token"`
}

// WorkspaceDir is where the workspace appears inside every sandbox.
const WorkspaceDir = "/workspace"
