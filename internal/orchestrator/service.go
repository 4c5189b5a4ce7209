// Package orchestrator is berth's service layer: every rule about users,
// tokens, clients, servers, operations, quotas, reuse, warm pools and idle
// reaping lives here. The REST API, the MCP tools, the CLI and the web
// console are thin adapters that call these methods with a principal; none
// of them decides anything on its own.
//
// State lives in PostgreSQL (through internal/store) and in the runtime,
// never only in this process, so any replica can serve any request and
// finish any operation another replica started.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// Config holds the orchestrator's tunables. Zero values take the defaults
// documented on each field.
type Config struct {
	// ReplicaID names this replica in operation leases; "" = hostname-pid.
	ReplicaID string
	// PublicURL is where clients reach this replica. It is recorded with
	// the runtime owner's liveness, so that a call for a sandbox only
	// this replica reaches, arriving at another, is told where to go.
	PublicURL string
	// ServerKey derives each sandbox's agent token and seals stored env
	// values. At least 32 bytes.
	ServerKey []byte

	// IdleTimeout stops servers with no heartbeat or exec for this long
	// (default 30m).
	IdleTimeout time.Duration
	// FinishedTTL stops finished (reusable) servers after this long
	// (default 1h).
	FinishedTTL time.Duration
	// WarmPool keeps this many ready servers per image tag.
	WarmPool map[string]int

	// MaxServersPerUser bounds a user's live servers (default 10).
	MaxServersPerUser int
	// MaxDiskPerUser bounds the disk a user's live servers take together,
	// in bytes, as the runtime sizes each sandbox (runtime.DiskSizer;
	// default DefaultMaxDiskPerUser).
	MaxDiskPerUser int64
	// MaxExecsPerUser bounds a user's concurrent execs (default 8).
	MaxExecsPerUser int
	// MaxOutputBytes caps what berth keeps of any one piece of sandbox
	// output: each stream of a command (max_output_bytes null, IdeGYM's
	// "unlimited", means this cap), a file read, a forward_request body
	// (default DefaultMaxOutputBytes, 4 MiB). Every agent answer berth
	// reads whole is bounded by a limit derived from it.
	MaxOutputBytes int64
	// MaxAnswerMemory bounds the memory all agent answers berth reads
	// whole hold at once (default DefaultMaxAnswerMemory, 96 MiB; never
	// less than one answer of the largest kind): an answer that would go
	// beyond it waits, then fails as unavailable.
	MaxAnswerMemory int64
	// MaxArchiveBytes bounds a tar archive streamed into or out of a
	// workspace (default DefaultMaxArchiveBytes, 256 MiB).
	MaxArchiveBytes int64
	// MaxInlineArchiveBytes bounds an archive passed whole, as base64 in
	// a JSON value (MCP), which berth holds in memory (default
	// DefaultMaxInlineArchiveBytes, 8 MiB).
	MaxInlineArchiveBytes int64

	// OperationLease is how long a replica holds an operation before
	// another may take it over (default 15s); it is renewed while the
	// operation runs.
	OperationLease time.Duration
	// OperationAttempts is how often a retriable operation is tried
	// before it fails (default 5).
	OperationAttempts int
	// ReadyTimeout bounds waiting for a new sandbox's agent (default 2m).
	ReadyTimeout time.Duration
	// WatchInterval is how often the watcher looks for idle servers,
	// stuck operations and the warm pool, and how often each runtime
	// owner reconciles its sandboxes with the records (default 10s).
	WatchInterval time.Duration
	// Deadlines of the calls to a sandbox's agent (deadlines.go). A call
	// its deadline cuts fails with gateway_timeout naming the server.
	// AgentCallTimeout bounds a file call (list, read, write, edit, ...)
	// and other short calls (default 30s). AgentCommandMargin is added to
	// a command's own timeout (and grace period) to bound the call that
	// runs it (default 30s). AgentMCPTimeout bounds a call to a server's
	// MCP endpoint (default 5m). AgentIdleTimeout ends a stream (the
	// streamed and WebSocket forward, forward_request, archives) that
	// moves no byte for that long (default 5m).
	AgentCallTimeout   time.Duration
	AgentCommandMargin time.Duration
	AgentMCPTimeout    time.Duration
	AgentIdleTimeout   time.Duration
	// HealthCheckTimeout bounds one health check of an agent (default
	// 5s); the watcher checks every running server's agent each round.
	// UnhealthyAfter is how long an agent may fail them before its server
	// is FAILED, and restarted under restart_policy on_failure (default
	// 1m); it is shown unhealthy from the first failed check.
	HealthCheckTimeout time.Duration
	UnhealthyAfter     time.Duration
	// MaxRestarts bounds the automatic restarts in a row of a server with
	// restart policy on_failure (default 3); a server that ran for ten
	// minutes since its last restart starts counting again.
	MaxRestarts int
	// DefaultNamespace is where new users get the member role (default
	// "default").
	DefaultNamespace string
	// MaxConcurrentBuilds bounds the image builds one replica runs at
	// once (default 2); the others wait, recorded as such.
	MaxConcurrentBuilds int
	// BuildTimeout bounds one image build whose YAML sets no
	// timeout_seconds (default 1h).
	BuildTimeout time.Duration
	// SessionImage is the image of the sandboxes SessionBash starts for
	// sessions that have none (default "base"); a warm pool of it makes
	// their first calls quick.
	SessionImage string

	// TokenDefaultTTL is the lifetime of a self-service session token
	// created without one (default 30 days); TokenMaxTTL the longest a
	// caller may ask for (default 365 days). Self-service tokens always
	// expire, so a leaked one stops working on its own.
	TokenDefaultTTL time.Duration
	TokenMaxTTL     time.Duration

	// EgressDefault is the network policy of a server started without
	// one (zero: DefaultEgress); EgressCeiling the widest a member may
	// ask for (zero: DefaultEgress's mode, public). Both apply on
	// runtimes that carry egress (runtime.EgressCarrier).
	EgressDefault egress.Policy
	EgressCeiling egress.Ceiling

	// Observe receives the operations, commands and agent calls this
	// replica runs (metrics, traces); zero hooks observe nothing.
	Observe observe.Hooks

	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if len(c.ServerKey) < 32 {
		return fmt.Errorf("server key is %d bytes, want at least 32", len(c.ServerKey))
	}
	if err := c.egressDefaults(); err != nil {
		return err
	}
	if c.ReplicaID == "" {
		host, _ := os.Hostname()
		c.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.IdleTimeout, 30*time.Minute)
	def(&c.FinishedTTL, time.Hour)
	def(&c.OperationLease, 15*time.Second)
	def(&c.ReadyTimeout, 2*time.Minute)
	def(&c.WatchInterval, 10*time.Second)
	def(&c.BuildTimeout, time.Hour)
	def(&c.AgentCallTimeout, DefaultAgentCallTimeout)
	def(&c.AgentCommandMargin, DefaultAgentCommandMargin)
	def(&c.AgentMCPTimeout, DefaultAgentMCPTimeout)
	def(&c.AgentIdleTimeout, DefaultAgentIdleTimeout)
	def(&c.HealthCheckTimeout, DefaultHealthCheckTimeout)
	def(&c.UnhealthyAfter, DefaultUnhealthyAfter)
	def(&c.TokenDefaultTTL, 30*24*time.Hour)
	def(&c.TokenMaxTTL, 365*24*time.Hour)
	if c.TokenDefaultTTL > c.TokenMaxTTL {
		return fmt.Errorf("token default lifetime %s is longer than the maximum %s", c.TokenDefaultTTL, c.TokenMaxTTL)
	}
	if c.MaxConcurrentBuilds <= 0 {
		c.MaxConcurrentBuilds = 2
	}
	if c.MaxServersPerUser <= 0 {
		c.MaxServersPerUser = 10
	}
	if c.MaxDiskPerUser <= 0 {
		c.MaxDiskPerUser = DefaultMaxDiskPerUser
	}
	if c.MaxExecsPerUser <= 0 {
		c.MaxExecsPerUser = 8
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 3
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.MaxAnswerMemory <= 0 {
		c.MaxAnswerMemory = DefaultMaxAnswerMemory
	}
	if c.MaxArchiveBytes <= 0 {
		c.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if c.MaxInlineArchiveBytes <= 0 {
		c.MaxInlineArchiveBytes = DefaultMaxInlineArchiveBytes
	}
	// The largest single answer must fit.
	c.MaxAnswerMemory = max(c.MaxAnswerMemory, outputAnswerLimit(c.MaxOutputBytes), contentLimit(c.MaxOutputBytes), c.MaxInlineArchiveBytes)
	if c.OperationAttempts <= 0 {
		c.OperationAttempts = 5
	}
	if c.SessionImage == "" {
		c.SessionImage = "base"
	}
	if c.DefaultNamespace == "" {
		c.DefaultNamespace = "default"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	for img, n := range c.WarmPool {
		if err := checkWarm(img, n); err != nil {
			return err
		}
	}
	return nil
}

func checkWarm(image string, n int) error {
	if strings.TrimSpace(image) == "" || strings.ContainsAny(image, " \t\n") || n < 0 {
		return fmt.Errorf("warm pool %q=%d: want IMAGE=N, an image without spaces and N >= 0", image, n)
	}
	return nil
}

// ParseWarmPool reads warm pool specs IMAGE=N (the --warm-pool flag) into
// Config.WarmPool, checked as New checks it.
func ParseWarmPool(specs []string) (map[string]int, error) {
	pool := map[string]int{}
	for _, spec := range specs {
		image, n, ok := strings.Cut(spec, "=")
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil {
			return nil, fmt.Errorf("warm pool %q: want IMAGE=N", spec)
		}
		if err := checkWarm(image, count); err != nil {
			return nil, err
		}
		pool[image] = count
	}
	return pool, nil
}

// Service is the orchestrator. Create it with New; start its background
// work (operation workers, watcher) with Run.
type Service struct {
	*Identity
	cfg   Config
	log   *slog.Logger
	store *store.Store
	rt    runtime.Runtime
	// owner is rt's runtime owner: this replica acts only on sandboxes
	// recorded with it (canAct).
	owner  runtime.Owner
	fwd    *forward.Forwarder
	events *events
	// egressLog gathers the egress gateways' refusals for the database.
	egressLog *egressLog
	wakeups   chan struct{}
	inline    inline
	// carries says the runtime carries its sandboxes' network
	// through egress gateways, which enforce network policies.
	carries bool
	// builds holds a token per image build running on this replica.
	builds chan struct{}
	quota  *execQuota
	// releases queues the releases of agents' copies of recorded
	// command answers (takeover.go).
	releases chan pendingRelease
	// execSession and execCommand observe commands, bound once.
	execSession, execCommand observe.Start
}

// New returns a Service over the store and runtime.
func New(st *store.Store, rt runtime.Runtime, cfg Config) (*Service, error) {
	if st == nil || rt == nil {
		return nil, errors.New("orchestrator: store and runtime are required")
	}
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("orchestrator config: %w", err)
	}
	s := &Service{
		cfg:   cfg,
		log:   cfg.Logger,
		store: st,
		rt:    rt,
		owner: ownerOf(rt),
		fwd: &forward.Forwarder{Transports: forward.NewTransports(), Logger: cfg.Logger,
			Budget: forward.NewBudget(cfg.MaxAnswerMemory), Observe: cfg.Observe.Agent, Inject: cfg.Observe.Inject,
			IdleTimeout: cfg.AgentIdleTimeout},
		execSession: cfg.Observe.Exec.Bind("session"),
		execCommand: cfg.Observe.Exec.Bind("command"),
		wakeups:     make(chan struct{}, 1),
		builds:      make(chan struct{}, cfg.MaxConcurrentBuilds),
		releases:    make(chan pendingRelease, releaseQueue),
	}
	if err := s.checkDiskQuota(); err != nil {
		return nil, fmt.Errorf("orchestrator config: %w", err)
	}
	s.egressLog = newEgressLog()
	if c, ok := runtime.As[runtime.EgressCarrier](rt); ok {
		s.carries = c.CarryEgress(s.egressHooks())
	}
	if tr, ok := runtime.As[runtime.Transporter](rt); ok {
		s.fwd.Transports.Custom = tr.Transport
	}
	for _, img := range s.KnownImages() {
		if _, err := s.checkImage(context.Background(), img); err != nil {
			cfg.Logger.Warn("an image berth is set up to start is not on the runtime: its starts fail and its warm pool waits until it is there", "image_tag", img, "err", err)
		}
	}
	s.quota = newExecQuota(st, cfg.ReplicaID, cfg.MaxExecsPerUser, cfg.OperationLease, cfg.Logger)
	s.Identity = NewIdentity(st, cfg.DefaultNamespace, cfg.Logger)
	s.events = newEvents(st, cfg.Logger, s.wake)
	return s, nil
}

// Runtime returns the runtime's description (for /readyz and whoami).
func (s *Service) RuntimeInfo() runtime.Info { return s.rt.Info() }

// KnownImages are image tags this berth is set up to start (the session
// image, the warm pools' images), for forms to suggest; others may exist.
func (s *Service) KnownImages() []string {
	out := []string{s.cfg.SessionImage}
	for img := range s.cfg.WarmPool {
		if !slices.Contains(out, img) {
			out = append(out, img)
		}
	}
	slices.Sort(out[1:])
	return out
}

// Forwarder is the transport used to reach sandboxes; the REST adapter
// proxies through it after Service.ForwardTarget has said yes.
func (s *Service) Forwarder() *forward.Forwarder { return s.fwd }

// Ready reports whether the database answers.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.store.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// wake nudges the operation workers without blocking.
func (s *Service) wake() {
	select {
	case s.wakeups <- struct{}{}:
	default:
	}
}
