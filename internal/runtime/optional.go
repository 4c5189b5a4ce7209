package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/egress"
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

// ImageChecker is implemented by runtimes that can tell up front whether
// they can start an image (the local runtime: its templates, the host
// system, and image references it pulls at the start): the orchestrator
// asks before it makes anything for a start, refuses an unknown image,
// and records the image by the name the runtime gives it back, so that
// one image has one name (python:3.12 is docker.io/library/python:3.12)
// for reuse and warm pools. A runtime without it (Kubernetes) fails the
// start with its own reason, such as the kubelet's failed pull.
type ImageChecker interface {
	// CheckImage returns the name the runtime starts tag by (tag itself,
	// or the normalized form of an image reference), an *UnknownImage
	// when tag cannot name an image it can start, and another error when
	// it could not tell. An image reference that is well formed passes:
	// whether its registry has the image is the start's to find out.
	CheckImage(ctx context.Context, tag string) (string, error)
}

// UnknownImage is CheckImage's answer for an image the runtime cannot
// start.
type UnknownImage struct {
	Tag string
	// Reason, when set, says why tag names nothing startable (an
	// invalid reference, images on a runtime that cannot run them).
	Reason string
	// Known are some images the runtime does have, for the message.
	Known []string
	// More counts the images it has beyond Known.
	More int
}

func (e *UnknownImage) Error() string {
	msg := fmt.Sprintf("no image %q on this runtime", e.Tag)
	if e.Reason != "" {
		msg = e.Reason
	}
	if len(e.Known) > 0 {
		msg += "; it has " + strings.Join(e.Known, ", ")
		if e.More > 0 {
			msg += fmt.Sprintf(" and %d more", e.More)
		}
	}
	return msg
}

// ImageLister is implemented by runtimes that know the images they
// start without asking a registry (the local runtime's host system and
// templates, and its cache of OCI images), for list_images.
type ImageLister interface {
	ListImages(ctx context.Context) (Images, error)
}

// Images are what a runtime has of images.
type Images struct {
	// Named are the images it starts by a name of its own (the local
	// runtime's host, base and templates).
	Named []string `json:"named"`
	// Cached are the OCI images on its host, most recently used first.
	Cached []CachedImage `json:"cached"`
	// CacheBytes is what they take on disk, about; CacheLimit the size
	// past which images no sandbox uses are evicted.
	CacheBytes int64 `json:"cache_bytes"`
	CacheLimit int64 `json:"cache_limit"`
}

// CachedImage is one image of a runtime's cache.
type CachedImage struct {
	Digest string `json:"digest"`
	// Refs are the references it was pulled by, normalized.
	Refs []string `json:"refs"`
	Size int64    `json:"size"`
	// Sandboxes counts the sandboxes using it; an image in use is never
	// evicted.
	Sandboxes int       `json:"sandboxes"`
	Pulled    time.Time `json:"pulled"`
	LastUsed  time.Time `json:"last_used"`
}

// Owner names whoever can act on a runtime's sandboxes: create, stop,
// reach, reconcile and delete them. Every server row records the owner
// of its sandbox, and a replica acts only on sandboxes of its runtime's
// owner.
type Owner struct {
	// ID is stable across restarts. Replicas whose runtimes report the
	// same ID reach the same sandboxes (every replica of a Kubernetes
	// deployment); a local runtime's is its own (its host and data
	// directory).
	ID string
	// Name says where the sandboxes are in plain words, for operators'
	// logs (it may hold a host path: never shown to clients).
	Name string
	// Host is the host the sandboxes run on, "" when they are reachable
	// from anywhere (a cluster); clients may see it.
	Host string
	// Shared is true when every replica of a deployment has this owner
	// (a cluster), so that nothing is worth telling a client about
	// where a sandbox runs.
	Shared bool
}

// Owned is implemented by runtimes that name the owner of their
// sandboxes. A runtime that does not is treated as reachable by every
// replica, with no owner recorded.
type Owned interface {
	Owner() Owner
}

// Stopper is implemented by runtimes that can end a sandbox's processes
// and keep its workspace, so that Create starts it again with its files:
// what the automatic restart of a sandbox whose agent hung (still there,
// answering nothing) needs. Without it the orchestrator deletes such a
// sandbox before creating it again, and its files are lost.
type Stopper interface {
	Stop(ctx context.Context, serverID string) error
}

// EgressCarrier is implemented by runtimes whose sandboxes can reach the
// network only through berth's egress gateway, which applies each
// server's policy (the local runtime with full isolation, the Kubernetes
// runtime with an egress listener). On a runtime without it, or whose
// CarryEgress says false, the orchestrator refuses network policies
// rather than record one nothing enforces.
type EgressCarrier interface {
	// CarryEgress gives the runtime what its gateways ask the
	// orchestrator; called once, before sandboxes are started. It says
	// whether the runtime, as configured, carries its sandboxes' network
	// through the gateways.
	CarryEgress(EgressHooks) bool
}

// EgressHooks are the orchestrator's side of the egress gateways. Each
// is called from the gateways' goroutines and must not block for long.
type EgressHooks struct {
	// Server reads a server's policy and the bytes its sandbox has
	// moved so far, on every new connection: a changed policy applies at
	// once, whichever replica changed it.
	Server func(ctx context.Context, serverID string) (egress.Policy, int64, error)
	// Refused is told of each refused connection or lookup.
	Refused func(serverID string, r egress.Refusal)
	// Allowed is told of each allowed connection.
	Allowed func(serverID string)
	// Bytes records the bytes a server's sandbox has moved in all.
	Bytes func(ctx context.Context, serverID string, n int64) error
}

// egressBytesInterval is how often a sandbox's egress byte count is
// recorded, so that a restarted or another replica goes on counting from
// about there.
const egressBytesInterval = 5 * time.Second

// RecordBytes records what bytes says a sandbox's gateway has moved, now
// and then while ctx lasts and once more when it ends; recorded is the
// count already on record. Both runtimes' gateways run it.
func (h EgressHooks) RecordBytes(ctx context.Context, serverID string, bytes func() int64, recorded int64, log *slog.Logger) {
	t := time.NewTicker(egressBytesInterval)
	defer t.Stop()
	record := func(ctx context.Context) {
		if n := bytes(); n > recorded {
			if err := h.Bytes(ctx, serverID, n); err != nil {
				log.Warn("record sandbox egress bytes", "server_id", serverID, "err", err)
				return
			}
			recorded = n
		}
	}
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			record(rctx)
			cancel()
			return
		case <-t.C:
			record(ctx)
		}
	}
}
