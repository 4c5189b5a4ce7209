package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/api"
	"github.com/berth-mcp/berth/internal/console"
	"github.com/berth-mcp/berth/internal/dirlock"
	"github.com/berth-mcp/berth/internal/hostguard"
	"github.com/berth-mcp/berth/internal/mcpserver"
	"github.com/berth-mcp/berth/internal/oauth"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/telemetry"
)

type serveFlags struct {
	db               dbFlags
	listen           string
	publicURL        string
	runtime          string
	kube             kubeFlags
	sandbox          sandboxFlags
	egress           egressFlags
	hmacKeyFile      string
	idleTimeout      time.Duration
	finishedTTL      time.Duration
	warmPool         []string
	sessionImage     string
	maxServers       int
	maxDisk          string
	maxExecs         int
	tokenTTL         time.Duration
	tokenMaxTTL      time.Duration
	maxOutput        string
	answerMemory     string
	maxArchive       string
	maxInlineArchive string
	operationLease   time.Duration
	watchInterval    time.Duration
	agent            agentDeadlines
	replicaID        string
	logLevel         string
	allowedHosts     []string
	allowedOrigins   []string
	pprofListen      string
	metricsListen    string
	auth             authFlags
}

func newServeCmd(e *env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the berth server (REST API, MCP endpoint, orchestrator)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.auth.devLoginSet = cmd.Flags().Changed("dev-login")
			return serve(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	f.db.register(cmd)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on")
	fl.StringVar(&f.publicURL, "public-url", "", "URL clients use to reach berth (default http://<listen>)")
	fl.StringVar(&f.runtime, "runtime", "local", "where sandboxes run: local (processes on this machine) or kubernetes (pods)")
	f.kube.register(cmd)
	f.sandbox.register(cmd)
	f.egress.register(cmd)
	fl.StringVar(&f.hmacKeyFile, "hmac-key-file", "", "file with the server key (>= 32 bytes) that derives agent tokens; default <data-dir>/hmac.key, generated when missing")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 30*time.Minute, "stop servers with no heartbeat or exec for this long")
	fl.DurationVar(&f.finishedTTL, "finished-ttl", time.Hour, "stop finished (reusable) servers after this long")
	fl.StringArrayVar(&f.warmPool, "warm-pool", nil, "keep N ready servers of an image: IMAGE=N (repeatable)")
	fl.StringVar(&f.sessionImage, "session-image", "base", "image of the sandbox bash starts for a session (bash without server_id, keyed by X-Session-ID); a warm pool of it makes first calls fast")
	fl.IntVar(&f.maxServers, "max-servers-per-user", 10, "live servers a user may have")
	fl.StringVar(&f.maxDisk, "max-disk-per-user", "50Gi", "disk the live servers of a user may take together (each takes --sandbox-disk, or --pod-workspace-size on Kubernetes); past it a start answers 429")
	fl.IntVar(&f.maxExecs, "max-execs-per-user", 8, "concurrent commands a user may run")
	fl.DurationVar(&f.tokenTTL, "token-default-ttl", 30*24*time.Hour, "lifetime of a session token a user creates without asking for one (create_token, the console)")
	fl.DurationVar(&f.tokenMaxTTL, "token-max-ttl", 365*24*time.Hour, "longest lifetime a user may ask for a session token")
	fl.StringVar(&f.maxOutput, "max-output-bytes", "4Mi", "most berth keeps of each output stream of a command (max_output_bytes: null means this)")
	fl.StringVar(&f.answerMemory, "max-answer-memory", "96Mi", "memory all sandbox answers berth reads whole may hold at once")
	fl.StringVar(&f.maxArchive, "max-archive-bytes", "256Mi", "largest tar archive streamed into or out of a workspace")
	fl.StringVar(&f.maxInlineArchive, "max-inline-archive-bytes", "8Mi", "largest tar archive passed whole as base64 (MCP), which berth holds in memory")
	fl.DurationVar(&f.operationLease, "operation-lease", 15*time.Second, "how long a replica holds an operation before another that can reach its server's sandbox may take it over")
	fl.DurationVar(&f.watchInterval, "watch-interval", 10*time.Second, "how often the watcher reaps idle servers, fails stuck operations and fills the warm pool, and how often each replica compares its runtime's sandboxes with the records")
	f.agent.register(cmd)
	fl.StringVar(&f.replicaID, "replica-id", "", "name of this replica in operation leases (default hostname-pid)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringSliceVar(&f.allowedHosts, "allowed-hosts", nil, "further Host header values berth answers to, e.g. the name a reverse proxy forwards (the public URL's host is always allowed; other Hosts get 403 against DNS rebinding)")
	fl.StringSliceVar(&f.allowedOrigins, "allowed-origins", nil, "browser origins allowed to call /mcp besides the public URL's")
	fl.StringVar(&f.pprofListen, "pprof-listen", "", "loopback address (e.g. 127.0.0.1:6060) to serve Go profiles and database pool counters on, for measuring; off by default")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "address (e.g. 127.0.0.1:9090) to serve Prometheus metrics on at /metrics; off by default. It is a listener of its own with no authentication: give a loopback or private address only your monitoring reaches. Traces go to OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set")
	f.auth.register(cmd)
	return cmd
}

// serverKey reads the key file, or in the default location generates one
// on first start.
func serverKey(path, dataDir string, log *slog.Logger) ([]byte, error) {
	if path == "" {
		path = filepath.Join(dataDir, "hmac.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(fmt.Sprintf("%x\n", key)), 0o600); err != nil {
				return nil, fmt.Errorf("write server key: %w", err)
			}
			log.Info("generated a server key; replicas sharing a database must share it (--hmac-key-file)", "path", path)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	key := []byte(strings.TrimSpace(string(b)))
	if len(key) < 32 {
		return nil, fmt.Errorf("server key %s is %d bytes, want at least 32", path, len(key))
	}
	return key, nil
}

// lockDataDir takes the data directory's serve lock, or says which server
// holds it.
func lockDataDir(dir string) (*dirlock.Lock, error) {
	lock, err := dirlock.TryLock(dir, dirlock.Holder{PID: os.Getpid(), Command: "berth serve"})
	var held *dirlock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf("data directory %s is in use: %w; stop that one first, or give this server another --data-dir", dir, err)
	case err != nil:
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	return lock, nil
}

func serve(ctx context.Context, e *env, f serveFlags) error {
	log := e.logger(f.logLevel)
	if f.runtime != "local" && f.runtime != "kubernetes" {
		return fmt.Errorf("--runtime %q: want local or kubernetes", f.runtime)
	}
	warm, err := orchestrator.ParseWarmPool(f.warmPool)
	if err != nil {
		return err
	}
	maxOutput, err := quantity("--max-output-bytes", f.maxOutput, false)
	if err != nil {
		return err
	}
	answerMemory, err := quantity("--max-answer-memory", f.answerMemory, false)
	if err != nil {
		return err
	}
	setGC(answerMemory, log)
	maxArchive, err := quantity("--max-archive-bytes", f.maxArchive, false)
	if err != nil {
		return err
	}
	maxInlineArchive, err := quantity("--max-inline-archive-bytes", f.maxInlineArchive, false)
	if err != nil {
		return err
	}
	maxDisk, err := quantity("--max-disk-per-user", f.maxDisk, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.db.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// One server per data directory, before anything in it is touched: a
	// second one would adopt the first one's database and sandboxes.
	lock, err := lockDataDir(f.db.dataDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	publicURL := strings.TrimSuffix(f.publicURL, "/")
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	if err := lock.Update(dirlock.Holder{PID: os.Getpid(), Command: "berth serve", URL: publicURL}); err != nil {
		return err
	}
	key, err := serverKey(f.hmacKeyFile, f.db.dataDir, log)
	if err != nil {
		return err
	}
	obs, err := telemetry.FromEnv(ctx, f.metricsListen != "")
	if err != nil {
		return err
	}
	defer obs.Shutdown(context.WithoutCancel(ctx))
	f.db.tracer = obs.QueryTracer()
	st, closeDB, err := f.db.openDB(ctx, log, true)
	if err != nil {
		return err
	}
	defer closeDB()
	obs.WatchStore(st, log)
	egressDefault, egressCeiling, err := f.egress.policies()
	if err != nil {
		return err
	}
	rawRT, err := f.openRuntime(ctx, log, databaseAddrs(ctx, st))
	if err != nil {
		return err
	}
	defer rawRT.Close()
	rt := obs.Runtime(rawRT)
	obs.WatchSpace(rt, log)
	svc, err := orchestrator.New(st, rt, orchestrator.Config{
		ReplicaID: f.replicaID, PublicURL: publicURL, ServerKey: key, IdleTimeout: f.idleTimeout, FinishedTTL: f.finishedTTL,
		WarmPool: warm, SessionImage: f.sessionImage, MaxServersPerUser: f.maxServers, MaxDiskPerUser: maxDisk, MaxExecsPerUser: f.maxExecs,
		MaxOutputBytes: maxOutput, MaxAnswerMemory: answerMemory,
		MaxArchiveBytes: maxArchive, MaxInlineArchiveBytes: maxInlineArchive,
		OperationLease: f.operationLease, WatchInterval: f.watchInterval, TokenDefaultTTL: f.tokenTTL, TokenMaxTTL: f.tokenMaxTTL,
		AgentCallTimeout: f.agent.call, AgentCommandMargin: f.agent.commandMargin, AgentMCPTimeout: f.agent.mcp,
		AgentIdleTimeout: f.agent.idle, HealthCheckTimeout: f.agent.healthCheck, UnhealthyAfter: f.agent.unhealthyAfter,
		EgressDefault: egressDefault, EgressCeiling: egressCeiling,
		Observe: obs.Orchestrator(), Logger: log,
	})
	if err != nil {
		return err
	}
	authSetup, err := setupAuth(ctx, f.auth, publicURL, ln.Addr().String(), st, svc, key, log)
	if err != nil {
		return err
	}
	authOpts := authSetup.middleware
	authOpts.Failed = obs.AuthFailed()
	hosts := hostguard.Options{PublicURL: publicURL, AllowedHosts: f.allowedHosts, AllowedOrigins: f.allowedOrigins}
	mcpSrv := mcpserver.New(svc, mcpserver.Options{Auth: authOpts, Guard: mcpserver.GuardOptions{Hosts: hosts}, Tool: obs.Tool(), Logger: log})
	cons, err := console.New(console.Options{Service: svc, Sessions: authSetup.sessions, SignOutPurpose: oauth.SignOutPurpose, PublicURL: publicURL, Logger: log})
	if err != nil {
		return err
	}
	handler := api.NewServer(svc, api.Options{Auth: authOpts, Hosts: hosts, MCP: mcpSrv.Handler(), OAuth: authSetup.handler,
		Console: cons.Handler(), Observe: obs.HTTP(log), Logger: log})
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if f.pprofListen != "" {
		if err := listenPprof(runCtx, f.pprofListen, st.Pool, log); err != nil {
			return err
		}
	}
	if err := obs.ListenMetrics(runCtx, f.metricsListen, log); err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- svc.Run(runCtx) }()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return runCtx }}
	srv.RegisterOnShutdown(cons.Shutdown)
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	log.Info("berth is serving", "url", publicURL, "runtime", rt.Info().Name, "isolation", rt.Info().Isolation)
	if !rt.Info().Confined {
		fmt.Fprintln(e.stderr, "WARNING: sandboxes run unconfined (--isolation none): code in any sandbox can read berth's data and key, reach its database and every other sandbox")
	}
	fmt.Fprintf(e.stderr, "berth is serving on %s\n%s\nOpen %s/ in a browser to sign in and watch your sandboxes.\nMCP clients connect to %s/mcp; or get a token: berth token create --user $USER --data-dir %s\n",
		publicURL, authSetup.summary, publicURL, publicURL, f.db.dataDir)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveDone:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	stopRun()
	<-runDone
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	log.Info("berth stopped")
	return serveErr
}

// openRuntime starts the runtime --runtime names.
func (f serveFlags) openRuntime(ctx context.Context, log *slog.Logger, never []netip.AddrPort) (runtime.Runtime, error) {
	if f.runtime == "kubernetes" {
		eg, err := f.egress.runtimeOptions(never)
		if err != nil {
			return nil, err
		}
		return f.kube.open(ctx, log, eg)
	}
	opts, err := f.sandbox.options(f.db.dataDir, []string{f.hmacKeyFile, f.db.databaseURLFile}, log)
	if err != nil {
		return nil, err
	}
	// One flag for both runtimes: a build's image goes to the same place.
	opts.ImageRegistry = f.kube.registry
	if opts.Egress, err = f.egress.runtimeOptions(never); err != nil {
		return nil, err
	}
	return local.Open(opts)
}
