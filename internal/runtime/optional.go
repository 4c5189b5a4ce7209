package runtime

import (
	"context"
	"net/http"
	"time"
)

// Capabilities only some runtimes have are small interfaces of their
// own, which the orchestrator detects with a type assertion; a runtime
// without one answers the feature's calls with a clear "not on this
// runtime" through the orchestrator.

// NodeHolder is implemented by runtimes that can hold nodes for a client
// ahead of its servers (IdeGYM's nodes_count), so its sandboxes start on
// nodes that are already there.
type NodeHolder interface {
	// HoldNodes makes the runtime hold n nodes for the client, n = 0
	// releasing them. It is idempotent.
	HoldNodes(ctx context.Context, namespace, clientID string, n int) error
	// HeldNodes says how many nodes are held for the client now.
	HeldNodes(ctx context.Context, namespace, clientID string) (int, error)
	// Holders lists the clients nodes are held for, so the orchestrator
	// can release those of clients that are gone.
	Holders(ctx context.Context) ([]NodeHolding, error)
}

// NodeHolding names a client nodes are held for.
type NodeHolding struct {
	Namespace, ClientID string
}

// Assigner is implemented by runtimes that record whose a sandbox is on
// the sandbox itself (Kubernetes labels), so that a warm sandbox handed to
// a client says so there too.
type Assigner interface {
	Assign(ctx context.Context, serverID, clientID, ownerID string) error
}

// EventReporter is implemented by runtimes whose sandboxes have events
// of their own (a pod's scheduling, pulls, probes, kills), which
// get_server shows.
type EventReporter interface {
	// Events returns the sandbox's recent events, oldest first.
	Events(ctx context.Context, serverID string) ([]Event, error)
}

// Event is one thing that happened to a sandbox.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // Normal or Warning
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
}

// Transporter is implemented by runtimes whose endpoints are not reached
// by dialing their network and address: the Kubernetes runtime's pods
// behind the API server's proxy. The transport gets requests for
// http://agent/<path> with the agent token in Authorization.
type Transporter interface {
	Transport(ep Endpoint) (http.RoundTripper, error)
}

// Stopper is implemented by runtimes that can end a sandbox's processes
// and keep its workspace, so that Create starts it again with its files:
// what the automatic restart of a sandbox whose agent hung (still there,
// answering nothing) needs. Without it the orchestrator deletes such a
// sandbox before creating it again, and its files are lost.
type Stopper interface {
	Stop(ctx context.Context, serverID string) error
}
