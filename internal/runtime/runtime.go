// Package runtime defines what the orchestrator needs from a place that
// runs sandboxes: create one running berth-agent, wait until it answers,
// reach it, read its logs and delete it. Implementations live in
// sub-packages: local (a child process per sandbox, the embedded default)
// and, later, kube (a pod per sandbox).
//
// Every method is keyed by the server id and idempotent, because the
// orchestrator may retry an operation on another replica after a crash:
// creating what exists or deleting what is gone is not an error.
package runtime

import (
	"context"
	"errors"
	"fmt"
)

// Spec describes one sandbox to create.
type Spec struct {
	// ServerID names the sandbox; implementations derive every resource
	// name from it so that a retried Create finds what an earlier attempt
	// made.
	ServerID string
	// Namespace, ClientID and OwnerID say whose the sandbox is: runtimes
	// place and label it by them (a Kubernetes namespace, labels).
	Namespace        string
	ClientID         string
	OwnerID          string
	ImageTag         string
	RuntimeClassName string
	Resources        Resources
	// Env is set in the sandbox's environment. Values may be secrets:
	// implementations must not log them.
	Env map[string]string
	// AgentToken is the bearer token the agent will require.
	AgentToken string
	// Upstreams are MCP servers inside the sandbox that the agent's
	// gateway proxies. Every runtime writes them where the agent reads
	// them (UpstreamFiles) and starts the agent with --upstreams-dir
	// UpstreamsDir, also when there are none. URLs and header values may
	// be secrets: implementations must not log them.
	Upstreams []Upstream
	// Progress, when set, is told how far a Create that takes long (an
	// image pull) is. It may be called from any goroutine, never after
	// Create returned, and must not block for long.
	Progress func(Progress)
}

// Progress is how far a sandbox's creation is: the step it is at and, for
// an image pull, the bytes and layers fetched so far.
type Progress struct {
	Step        string `json:"step"`
	BytesDone   int64  `json:"bytes_done,omitempty"`
	BytesTotal  int64  `json:"bytes_total,omitempty"`
	LayersDone  int    `json:"layers_done,omitempty"`
	LayersTotal int    `json:"layers_total,omitempty"`
}

// String says it in a line: "pulling docker.io/library/python:3.12:
// 12.5Mi of 48Mi, 1 of 4 layers".
func (p Progress) String() string {
	s := p.Step
	if p.BytesTotal > 0 || p.LayersTotal > 0 {
		s += fmt.Sprintf(": %s of %s, %d of %d layers", FormatBytes(p.BytesDone), FormatBytes(p.BytesTotal), p.LayersDone, p.LayersTotal)
	}
	return s
}

// Fraction is how much of the step is done, in [0, 1]: bytes when it
// counts them, else layers, else 0.
func (p Progress) Fraction() float64 {
	switch {
	case p.BytesTotal > 0:
		return min(1, float64(p.BytesDone)/float64(p.BytesTotal))
	case p.LayersTotal > 0:
		return min(1, float64(p.LayersDone)/float64(p.LayersTotal))
	}
	return 0
}

// Resources are requested compute resources in Kubernetes quantity
// notation ("500m", "2Gi"); empty means the runtime default.
type Resources struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// Endpoint is where a sandbox's agent listens.
type Endpoint struct {
	Network string `json:"network"` // "unix" or "tcp"
	Address string `json:"address"` // socket path or host:port
}

// State is a sandbox's lifecycle state as the runtime sees it.
type State string

const (
	StatePending State = "pending" // created, agent not answering yet
	StateReady   State = "ready"   // agent answers its health check
	StateFailed  State = "failed"  // will not become ready without help
	StateGone    State = "gone"    // nothing exists for this id
)

// Status is a sandbox's observed state.
type Status struct {
	State    State
	Message  string
	Endpoint Endpoint
}

// Info tells what a runtime is and can do.
type Info struct {
	Name string `json:"name"`
	// Isolation says plainly how sandboxes are isolated from each other
	// and from the host.
	Isolation string `json:"isolation"`
	// Confined is false when sandboxes run without isolation, which an
	// operator must have asked for; /readyz and the console say so.
	Confined bool     `json:"confined"`
	Features []string `json:"features"`
}

// ErrNotSupported is returned (wrapped, with an explanation) for features
// a runtime does not have. Whole capabilities a runtime may lack are
// optional interfaces instead (see optional.go, images.go).
var ErrNotSupported = errors.New("not supported by this runtime")

// Exit reports a sandbox that stopped on its own: its agent died, or it
// was killed for exceeding a limit.
type Exit struct {
	ServerID string
	// Reason says what happened, in plain words, with the agent's last
	// log lines when there are any.
	Reason string
}

// Watcher is implemented by runtimes that report sandboxes stopping on
// their own as it happens, so the orchestrator marks them failed within
// moments instead of at its next reconcile round. Sandboxes found dead
// when the runtime started are reported too.
type Watcher interface {
	// Watch calls fn, from the runtime's own goroutines, for every exit
	// from now until ctx ends. Deletes do not count.
	Watch(ctx context.Context, fn func(Exit))
}

// Runtime runs sandboxes.
type Runtime interface {
	Info() Info
	// Create starts the sandbox if it does not exist yet. It does not
	// wait for readiness.
	Create(ctx context.Context, spec Spec) error
	// WaitReady blocks until the agent answers, the sandbox fails, or ctx
	// ends.
	WaitReady(ctx context.Context, serverID string) (Endpoint, error)
	Status(ctx context.Context, serverID string) (Status, error)
	// Delete stops the sandbox and removes its resources, including its
	// filesystem.
	Delete(ctx context.Context, serverID string) error
	// Logs returns up to the last tail lines of the agent's log.
	Logs(ctx context.Context, serverID string, tail int) (string, error)
	// List returns the ids of every sandbox the runtime holds, so the
	// orchestrator can reconcile them with its records.
	List(ctx context.Context) ([]string, error)
	Close() error
}
