package orchestrator

import (
	"time"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Client statuses.
const (
	ClientAlive    = "ALIVE"
	ClientFinished = "FINISHED"
	ClientStopped  = "STOPPED"
)

// Server statuses.
const (
	ServerStarting = "STARTING"
	ServerRunning  = "RUNNING"
	ServerFinished = "FINISHED"
	ServerStopping = "STOPPING"
	ServerStopped  = "STOPPED"
	ServerFailed   = "FAILED"
)

// Operation statuses (IdeGYM names).
const (
	OpScheduled  = "SCHEDULED"
	OpInProgress = "IN_PROGRESS"
	OpSucceeded  = "SUCCEEDED"
	OpFailed     = "FAILED"
	OpCancelled  = "CANCELLED"
)

// Reuse strategies of StartServer.
const (
	ReuseNone    = "NONE"
	ReuseReset   = "RESET"
	ReuseRestart = "RESTART"
)

// ServerDetail is get_server's answer: the server, where its sandbox is
// on runtimes where only one replica reaches it (local), and its recent
// events.
type ServerDetail struct {
	Server
	Placement *Placement      `json:"placement,omitempty" jsonschema:"which berth replica holds the sandbox (local runtime): direct calls for the server go there, and gone says it has not been seen for a while"`
	Events    []runtime.Event `json:"events,omitempty"`
}

// operationDone reports whether the operation reached a final status.
func operationDone(o store.Operation) bool {
	return o.Status == OpSucceeded || o.Status == OpFailed || o.Status == OpCancelled
}

// RegisterClientRequest is the body of POST /api/clients and the
// register_client tool.
type RegisterClientRequest struct {
	Name       string `json:"name" jsonschema:"a name for this client, e.g. the agent run"`
	Namespace  string `json:"namespace,omitempty" jsonschema:"namespace (RFC 1123 label); default: default"`
	NodesCount int    `json:"nodes_count,omitempty" jsonschema:"nodes to pre-provision (Kubernetes runtime only)"`
}

// StartServerRequest is the body of POST /api/servers and the
// start_server tool.
type StartServerRequest struct {
	ClientID         string            `json:"client_id" jsonschema:"the client that will own the server"`
	Namespace        string            `json:"namespace,omitempty" jsonschema:"must match the client's namespace when given"`
	ImageTag         string            `json:"image_tag" jsonschema:"sandbox image: an OCI image reference (python:3.12, registry.example.com/team/dev:v3, name@sha256:...), pulled at the start; on the local runtime also host (the host system read-only), base (the default image) or the name of an image or template built by build_images_from_yaml (see list_images)"`
	ServerName       string            `json:"server_name,omitempty" jsonschema:"a name for the server; reuse matches on it"`
	RuntimeClassName string            `json:"runtime_class_name,omitempty" jsonschema:"Kubernetes runtime class, e.g. gvisor"`
	Resources        *Resources        `json:"resources,omitempty" jsonschema:"cpu and memory requests, Kubernetes notation"`
	Env              map[string]string `json:"env,omitempty" jsonschema:"environment variables of the sandbox (values are stored encrypted)"`
	MCPUpstreams     []MCPUpstream     `json:"mcp_upstreams,omitempty" jsonschema:"MCP servers the sandbox will run (started by you, e.g. with bash), proxied by its agent: list_server_mcp_tools shows their tools as <name>_<tool>. Kept like env: RESET keeps those the sandbox was started with, RESTART takes these"`
	RestartPolicy    string            `json:"restart_policy,omitempty" jsonschema:"never (default): a server whose sandbox stops on its own (its agent died, a limit killed it) is marked FAILED with the reason; on_failure: berth recreates the sandbox, keeping its files, up to 3 times in a row"`
	ReuseStrategy    string            `json:"reuse_strategy,omitempty" jsonschema:"NONE (default), RESET (reuse a finished server: keep its files and the env it was started with, end its shells) or RESTART (reuse its slot with a fresh filesystem and this env)"`
	WaitSeconds      float64           `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) and return the finished operation inline"`
	Network          *egress.Policy    `json:"network,omitempty" jsonschema:"what the sandbox may reach (default: the operator's, usually public): egress none, allowlist (with allow: domain names such as pypi.org or *.github.com, addresses or CIDRs, each optionally with :port) or public (the internet, never berth, its host, private ranges or cloud metadata). The sandbox reaches it through a proxy (HTTP_PROXY, ALL_PROXY and a resolver are set); set_server_network changes it"`
}

// StartServerResult is the JSON in a start_server operation's result.
type StartServerResult struct {
	ServerID string `json:"server_id"`
	ClientID string `json:"client_id"`
	Reused   string `json:"reused,omitempty"` // RESET, RESTART or "" (new)
	Warm     bool   `json:"warm,omitempty"`   // taken from the warm pool
	Server   Server `json:"server"`
}

// ServerRef names a server inside a client, as IdeGYM's server tools do.
type ServerRef struct {
	ClientID  string `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	Namespace string `json:"namespace,omitempty" jsonschema:"ignored; accepted for IdeGYM compatibility"`
	ServerID  string `json:"server_id" jsonschema:"the server"`
}

// RunBashRequest is the body of POST /api/servers/{id}/bash and the
// run_bash_command tool: the agent's /api/tools/bash fields plus the
// server and wait_seconds.
type RunBashRequest struct {
	ClientID                   string             `json:"client_id,omitempty" jsonschema:"the server's client (optional; checked when given)"`
	ServerID                   string             `json:"server_id" jsonschema:"the server to run in"`
	Command                    string             `json:"command" jsonschema:"bash script to run"`
	CommandTimeout             *float64           `json:"command_timeout,omitempty" jsonschema:"seconds before the command is terminated (default 600)"`
	GracefulTerminationTimeout *float64           `json:"graceful_termination_timeout,omitempty" jsonschema:"seconds between SIGTERM and SIGKILL on timeout (default 2)"`
	MaxOutputBytes             wire.OptionalInt64 `json:"max_output_bytes,omitzero" jsonschema:"bytes kept per stream, head and tail (default 1048576); null, IdeGYM's unlimited, and values above the server's cap mean the cap (4194304 unless the operator set another)"`
	Cwd                        string             `json:"cwd,omitempty" jsonschema:"working directory (default: the workspace)"`
	Env                        map[string]string  `json:"env,omitempty" jsonschema:"extra environment; pass secrets here rather than in command"`
	User                       string             `json:"user,omitempty" jsonschema:"run as this user (needs the agent to run as root)"`
	StripOutput                bool               `json:"strip_output,omitempty" jsonschema:"trim whitespace around stdout and stderr"`
	WaitSeconds                float64            `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) and return the finished operation inline"`
}

// Whoami describes the caller.
type Whoami struct {
	UserID     string    `json:"user_id"`
	Username   string    `json:"username"`
	Groups     []string  `json:"groups"`
	Roles      []RoleIn  `json:"roles"`
	Scopes     []string  `json:"scopes"`
	Namespaces []string  `json:"namespaces"`
	TokenID    string    `json:"token_id,omitempty"`
	Runtime    string    `json:"runtime"`
	Isolation  string    `json:"isolation"`
	Now        time.Time `json:"now"`
}

// RoleIn is a role and where it applies ("" = every namespace).
type RoleIn struct {
	Role      string `json:"role"`
	Namespace string `json:"namespace"`
}
