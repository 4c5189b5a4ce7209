package local

import (
	"log/slog"
	"net"
	"time"

	"github.com/berth-mcp/berth/internal/egress"

	"github.com/berth-mcp/berth/internal/image"
)

// What configures the local runtime, on every platform, so that berth's
// flags and their defaults exist where the runtime itself cannot run
// (it needs Linux: namespaces, cgroups, seccomp, memfd).

// Isolation modes.
const (
	// IsolationFull confines every sandbox; berth refuses to start when
	// any part of it cannot be applied.
	IsolationFull = "full"
	// IsolationNone runs sandboxes as plain processes of berth's user:
	// they can do whatever berth can.
	IsolationNone = "none"
)

// Options configure the local runtime.
type Options struct {
	// DataDir holds servers/ (one directory per sandbox), images/
	// (workspace templates named by image tag) and image-cache/ (OCI
	// images).
	DataDir string
	// AgentBinary is the berth-agent executable; "" looks next to the
	// running executable, then on PATH.
	AgentBinary string
	// Isolation is IsolationFull (the default) or IsolationNone.
	Isolation string
	// Limits are each sandbox's defaults; a start request's resources
	// override memory and CPU.
	Limits Limits
	// ReadOnlyPaths are the host paths sandboxes see, read-only; nil
	// means DefaultReadOnlyPaths.
	ReadOnlyPaths []string
	// HidePaths are further host paths to keep out of sandboxes' view
	// when they fall under ReadOnlyPaths (berth's key or database URL
	// file, say); the data directory is always hidden.
	HidePaths []string
	// UIDRegistry, UIDBase and UIDSlots place the host-wide allocation of
	// sandbox uid blocks; zero values are the defaults.
	UIDRegistry string
	UIDBase     int
	UIDSlots    int
	// Reserve is the free space kept on the data directory's filesystem
	// for berth and the sandboxes that exist: no volume, template copy or
	// sandbox is made that would leave less (0 = DefaultReserve).
	Reserve int64
	// SpaceCheckInterval is how often the free space is looked at, so
	// that falling below the reserve, and recovering, is logged when it
	// happens (0 = DefaultSpaceCheckInterval).
	SpaceCheckInterval time.Duration
	// ImageCacheBytes is the size of the image cache in
	// <data-dir>/image-cache, which sandboxes started from OCI images are
	// mounted from (0 = image.DefaultCacheBytes): past it, the least
	// recently used images no sandbox uses are removed.
	ImageCacheBytes int64
	// RegistryCredentials are presented to registries for pulls (the
	// operator's docker config); sandboxes never see them.
	RegistryCredentials image.Credentials
	// PlainHTTPRegistries are registries (host:port) reached over plain
	// HTTP, such as one on loopback; every other is HTTPS only.
	PlainHTTPRegistries []string
	// ImageRegistry is the repository prefix (registry.example.com/berth)
	// images built from OCI images are pushed to, with
	// RegistryCredentials, as on Kubernetes (--image-registry); without
	// it they stay in the image cache, named berth.local/NAME.
	ImageRegistry string
	// ImageMaxEntries and ImageMaxBytes bound one image: what the cache
	// unpacks of it, and what a build may add (0: the image package's
	// defaults).
	ImageMaxEntries int64
	ImageMaxBytes   int64
	// Egress configures the egress gateway of confined sandboxes.
	Egress EgressOptions
	Logger *slog.Logger
}

// EgressOptions configure the egress gateway that carries every confined
// sandbox's outbound connections (see egress.go).
type EgressOptions struct {
	// Guard is the address rule every connection passes, whatever the
	// server's policy: nil refuses everything that is not public.
	Guard *egress.Guard
	// Resolver resolves names for the gateway (nil: the host's).
	Resolver *net.Resolver
	// Limits bound each sandbox's egress.
	Limits egress.Limits
}

// Limits are per-sandbox resource limits.
type Limits struct {
	MemoryBytes int64 // 0 = DefaultMemoryBytes
	Pids        int64 // 0 = DefaultPids
	MilliCPU    int64 // 0 = unlimited
	DiskBytes   int64 // workspace volume size; 0 = DefaultDiskBytes
	TmpBytes    int64 // each of /tmp and /dev/shm; 0 = DefaultTmpBytes
}

// Default limits.
const (
	DefaultMemoryBytes = 2 << 30
	DefaultPids        = 1024
	DefaultDiskBytes   = 10 << 30
	DefaultTmpBytes    = 512 << 20
	// DefaultReserve covers what berth itself writes into the data
	// directory while sandboxes take the rest: the embedded PostgreSQL's
	// write-ahead log (up to its max_wal_size of 1 GiB between
	// checkpoints), logs and the blank volume images.
	DefaultReserve            = 2 << 30
	DefaultSpaceCheckInterval = 30 * time.Second
)

// DefaultReadOnlyPaths is the host system a sandbox sees: programs,
// libraries and configuration. Home directories, /var, /srv, /run, /tmp
// and everything else stay out.
var DefaultReadOnlyPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

const (
	// DefaultUIDBase is far above the ids distributions hand to accounts
	// (and the 100000+ ranges of /etc/subuid), and below 2^31, which some
	// tools treat as negative.
	DefaultUIDBase = 1 << 28
	// idsPerSandbox is the size of the id block each sandbox maps: the
	// 16-bit range ordinary images' users and groups live in.
	idsPerSandbox = 65536
	// DefaultUIDSlots blocks fit between the base and 2^31.
	DefaultUIDSlots = (1<<31 - DefaultUIDBase) / idsPerSandbox
	// DefaultUIDRegistry is the host-wide registry directory.
	DefaultUIDRegistry = "/var/lib/berth/uid-slots"
)
