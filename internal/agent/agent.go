// Package agent is berth-agent, the data plane inside every sandbox: an HTTP
// API under /api and an MCP endpoint at /mcp that run bash (one-shot and in
// persistent sessions), read and edit workspace files, run test rewards and
// proxy in-sandbox MCP servers. It holds no orchestrator state; the server
// reaches it with a per-sandbox bearer token.
//
// The work itself lives in the sub-packages (bash, session, workspace, edit,
// rewards, mcpgw); this package wires them to HTTP and owns the process's
// lifetime.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/agent/bash"
	"github.com/berth-mcp/berth/internal/agent/edit"
	"github.com/berth-mcp/berth/internal/agent/mcpgw"
	"github.com/berth-mcp/berth/internal/agent/opruns"
	"github.com/berth-mcp/berth/internal/agent/rewards"
	"github.com/berth-mcp/berth/internal/agent/session"
	"github.com/berth-mcp/berth/internal/agent/workspace"
)

// Config is everything berth-agent is started with.
type Config struct {
	Workspace string
	// CommandDir is where commands and new shell sessions start when
	// they name no cwd ("" = the workspace): an image's WorkingDir. One
	// that is not a directory when the agent starts is ignored.
	CommandDir string
	// CommandUser is who run_bash commands run as when they name no
	// user ("" = the agent's own user): an image's USER, as name, uid,
	// name:group or uid:gid.
	CommandUser string
	// Token is the bearer token every endpoint but /api/health requires.
	// It may be empty only when InsecureNoAuth is set.
	Token          string
	InsecureNoAuth bool

	UpstreamsDir          string
	AllowOutsideWorkspace bool
	SessionIdleTimeout    time.Duration
	TestCommand           string
	TestReports           []string

	// MaxRequestBytes limits JSON request bodies (0 = 16 MiB).
	MaxRequestBytes int64
	// MaxArchiveBytes limits uploaded tar archives (0 = 1 GiB).
	MaxArchiveBytes int64
	// Operations bounds the commands run for berth's operations and the
	// answers kept until berth collects them (zero fields: opruns'
	// defaults).
	Operations opruns.Options

	// Isolation describes how the sandbox is isolated, as told by whoever
	// started the agent; reported in /api/capabilities.
	Isolation string
	Version   string
	Logger    *slog.Logger
}

// Agent serves one sandbox.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	ws       *workspace.Workspace
	bash     *bash.Runner
	sessions *session.Manager
	editor   *edit.Editor
	rewards  *rewards.Runner
	gateway  *mcpgw.Gateway
	// runs holds the commands berth runs for its operations.
	runs *opruns.Table

	shutdownOnce sync.Once
	shutdown     chan struct{}
}

// New checks cfg and builds an Agent. Close releases what it opened.
func New(cfg Config) (*Agent, error) {
	if cfg.Token == "" && !cfg.InsecureNoAuth {
		return nil, errors.New("no agent token configured: pass --token-file or set BERTH_AGENT_TOKEN (or --insecure-no-auth for local debugging)")
	}
	if cfg.Workspace == "" {
		return nil, errors.New("no workspace: pass --workspace DIR")
	}
	abs, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", abs)
	}
	cfg.Workspace = abs
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 16 << 20
	}
	if cfg.MaxArchiveBytes <= 0 {
		cfg.MaxArchiveBytes = 1 << 30
	}
	if cfg.Isolation == "" {
		cfg.Isolation = "none: plain process"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	ws, err := workspace.Open(workspace.Options{
		Root:            abs,
		AllowOutside:    cfg.AllowOutsideWorkspace,
		MaxArchiveBytes: cfg.MaxArchiveBytes,
		MaxWriteBytes:   cfg.MaxRequestBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	cmdDir := abs
	if cfg.CommandDir != "" {
		if st, err := os.Stat(cfg.CommandDir); err == nil && st.IsDir() && filepath.IsAbs(cfg.CommandDir) {
			cmdDir = cfg.CommandDir
		} else {
			log.Warn("the default directory of commands is not a directory: commands start in the workspace", "dir", cfg.CommandDir)
		}
	}
	a := &Agent{
		cfg:      cfg,
		log:      log,
		ws:       ws,
		bash:     &bash.Runner{Workspace: abs, Dir: cmdDir, User: cfg.CommandUser},
		sessions: session.NewManager(session.Options{Workspace: cmdDir, IdleTimeout: cfg.SessionIdleTimeout}),
		editor:   &edit.Editor{Root: ws.OSRoot(), MaxFileBytes: cfg.MaxRequestBytes},
		runs:     opruns.New(cfg.Operations),
		shutdown: make(chan struct{}),
	}
	a.rewards = &rewards.Runner{Bash: a.bash, DefaultCommand: cfg.TestCommand, DefaultReports: cfg.TestReports, Workspace: abs}
	gw, err := mcpgw.New(mcpgw.Options{
		Backend:      backend{a},
		UpstreamsDir: cfg.UpstreamsDir,
		Logger:       log.With("component", "mcp-gateway"),
		Version:      cfg.Version,
	})
	if err != nil {
		a.runs.Close()
		ws.Close()
		return nil, fmt.Errorf("mcp gateway: %w", err)
	}
	a.gateway = gw
	if cfg.InsecureNoAuth {
		log.Warn("AUTHENTICATION IS OFF (--insecure-no-auth): anyone who can reach this agent can run commands in it; use only for local debugging")
	}
	return a, nil
}

// Run runs the agent's background work (idle session reaping, MCP upstream
// connections) until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{a.sessions.Run, a.gateway.Run} {
		wg.Go(func() {
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// ShutdownRequested is closed when a client called POST /api/shutdown.
func (a *Agent) ShutdownRequested() <-chan struct{} { return a.shutdown }

func (a *Agent) requestShutdown() { a.shutdownOnce.Do(func() { close(a.shutdown) }) }

// Close ends every session and every command run for an operation, and
// releases the workspace.
func (a *Agent) Close() error {
	a.runs.Close()
	return errors.Join(a.sessions.Close(), a.ws.Close())
}
