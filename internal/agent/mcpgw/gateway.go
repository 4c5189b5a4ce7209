package mcpgw

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultRetryInterval is how often a down upstream is retried when
// Options.RetryInterval is zero.
const DefaultRetryInterval = 30 * time.Second

// firstRetry is the first wait after a round that left an upstream down;
// it doubles up to the retry interval. An upstream is usually started
// moments after the agent (by a command in the sandbox), and should show
// up in moments, not at the next full interval.
const firstRetry = 250 * time.Millisecond

// instructions is sent to MCP clients on initialization.
const instructions = "Tools of a berth development sandbox. " +
	"bash runs commands in persistent shell sessions (pick one with the session argument); " +
	"read_file reads a file by lines; create_file writes a new file; edit_file replaces a range of lines; " +
	"patch_file applies a unified diff. " +
	"All paths are relative to the workspace root, which is also where bash sessions start. " +
	"Tools named <server>_<tool> are forwarded to MCP servers running inside the sandbox."

// Options configures a Gateway.
type Options struct {
	// Backend runs the built-in tools. Required.
	Backend Backend
	// UpstreamsDir holds one <name>.json file per upstream MCP server;
	// "" means no upstreams. It is re-read on every retry round, so
	// upstreams can be added and removed while the agent runs.
	UpstreamsDir string
	// Logger receives warnings about upstreams; nil uses slog.Default().
	Logger *slog.Logger
	// Version is reported as the server version.
	Version string
	// RetryInterval is how often a down upstream is retried and a live one
	// re-listed; 0 means DefaultRetryInterval.
	RetryInterval time.Duration
	// HTTPClient is used for upstream connections; nil means a client with
	// bounded connection set-up.
	HTTPClient *http.Client
}

// Gateway is the agent's MCP server: built-in tools plus the tools of the
// upstreams, served over streamable HTTP.
type Gateway struct {
	log        *slog.Logger
	sdkLog     *slog.Logger // g.log for warnings and errors only
	dir        string
	version    string
	interval   time.Duration
	httpClient *http.Client
	server     *mcp.Server
	handler    http.Handler
	builtins   map[string]bool

	// kick asks Run for a round before the next tick: an upstream call
	// failed or an upstream said its tool list changed.
	kick    chan struct{}
	running atomic.Bool

	mu        sync.Mutex
	upstreams map[string]*upstream // by name
	owners    map[string]*upstream // exposed tool name -> upstream that registered it
	problems  map[string]string    // config file or directory -> last problem logged
}

// New builds a Gateway with the built-in tools registered. It does no
// network I/O; Run connects the upstreams.
func New(opts Options) (*Gateway, error) {
	if opts.Backend == nil {
		return nil, errors.New("mcpgw: Options.Backend is required")
	}
	if opts.RetryInterval < 0 {
		return nil, errors.New("mcpgw: Options.RetryInterval must not be negative")
	}
	g := &Gateway{
		log:        opts.Logger,
		dir:        opts.UpstreamsDir,
		version:    opts.Version,
		interval:   opts.RetryInterval,
		httpClient: opts.HTTPClient,
		builtins:   map[string]bool{},
		kick:       make(chan struct{}, 1),
		upstreams:  map[string]*upstream{},
		owners:     map[string]*upstream{},
		problems:   map[string]string{},
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	// The SDK logs every stateless request at info level.
	g.sdkLog = slog.New(minLevel{g.log.Handler(), slog.LevelWarn})
	if g.version == "" {
		g.version = "dev"
	}
	if g.interval == 0 {
		g.interval = DefaultRetryInterval
	}
	if g.httpClient == nil {
		g.httpClient = defaultHTTPClient()
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "berth-agent", Title: "berth sandbox", Version: g.version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       g.sdkLog,
		// Tools only; the default would also advertise logging.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	if err := addBuiltins(g.server, opts.Backend); err != nil {
		return nil, err
	}
	for _, n := range builtinNames() {
		g.builtins[n] = true
	}
	// Stateless with JSON responses: every POST stands alone, so the berth
	// server in front can reach the agent over any connection and an agent
	// restart loses no session. Clients of the 2026-07-28 protocol still
	// hear tools/list_changed through subscriptions/listen, which the SDK
	// streams even in this mode; older clients see upstream tools come and
	// go on their next tools/list.
	g.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       g.sdkLog,
		// Nobody can read the answer of a call whose HTTP request is gone,
		// so stop the work (a bash command, an upstream call) too.
		PropagateRequestCancellation: true,
	})
	// Reading the directory now lets Upstreams report configured upstreams
	// before Run's first round has connected them.
	g.reloadConfigs()
	return g, nil
}

// Handler returns the streamable HTTP MCP handler, to be mounted at /mcp.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Run connects the upstreams and, every RetryInterval until ctx ends,
// re-reads the upstreams directory, retries the down upstreams and
// re-lists the live ones (which also finds upstreams that died). On return
// every upstream session is closed; their tools then answer that the
// upstream is unreachable.
func (g *Gateway) Run(ctx context.Context) error {
	if !g.running.CompareAndSwap(false, true) {
		return errors.New("mcpgw: Run is already running")
	}
	defer g.running.Store(false)
	defer g.disconnectAll()
	var retry time.Duration
	for {
		wait := g.interval
		if g.round(ctx) {
			retry = min(max(2*retry, firstRetry), g.interval)
			wait = retry
		} else {
			retry = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-g.kick:
			t.Stop()
		}
	}
}

// Upstreams describes every configured upstream, sorted by name.
func (g *Gateway) Upstreams() []wire.UpstreamInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]wire.UpstreamInfo, 0, len(g.upstreams))
	for _, name := range slices.Sorted(maps.Keys(g.upstreams)) {
		u := g.upstreams[name]
		out = append(out, wire.UpstreamInfo{
			Name:      u.name,
			URL:       u.display,
			Connected: u.conn != nil,
			Tools:     len(u.tools),
			LastError: u.lastErr,
		})
	}
	return out
}

// round is one pass of Run: apply config changes, then refresh every
// upstream concurrently so that a hanging one does not delay the others.
// It reports whether an upstream is still down.
func (g *Gateway) round(ctx context.Context) (down bool) {
	current := g.reloadConfigs()
	var wg sync.WaitGroup
	for _, u := range current {
		wg.Go(func() { g.refresh(ctx, u) })
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, u := range current {
		if u.conn == nil && !u.retired {
			down = true
		}
	}
	return down
}

// reloadConfigs applies the upstreams directory to the set of upstreams
// and returns the current ones.
func (g *Gateway) reloadConfigs() []*upstream {
	cfgs, problems, err := loadConfigs(g.dir)
	g.reportProblems(problems, err)

	var stale []*upstream
	g.mu.Lock()
	if err == nil { // an unreadable directory keeps what we have
		for name, u := range g.upstreams {
			if c, ok := cfgs[name]; !ok || !c.equal(u.cfg) {
				stale = append(stale, u)
				delete(g.upstreams, name)
			}
		}
		for name, c := range cfgs {
			if _, ok := g.upstreams[name]; !ok {
				g.upstreams[name] = g.newUpstream(name, c)
				g.log.Info("upstream configured", "upstream", name, "url", displayURL(c.URL))
			}
		}
	}
	var closing []*upstreamConn
	for _, u := range stale {
		if c := g.retireLocked(u); c != nil {
			closing = append(closing, c)
		}
	}
	current := slices.Collect(maps.Values(g.upstreams))
	g.mu.Unlock()

	for _, u := range stale {
		g.log.Info("upstream removed or reconfigured", "upstream", u.name)
	}
	for _, c := range closing {
		c.close()
	}
	return current
}

// reportProblems logs each skipped config file once per distinct problem,
// so a bad file does not log a warning every round.
func (g *Gateway) reportProblems(problems []configProblem, dirErr error) {
	seen := map[string]string{}
	for _, p := range problems {
		seen[p.file] = p.err.Error()
	}
	if dirErr != nil {
		seen[g.dir] = dirErr.Error()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for file, msg := range seen {
		if g.problems[file] != msg {
			g.log.Warn("skipping upstream config", "file", file, "error", msg)
		}
	}
	g.problems = seen
}

// disconnectAll closes every upstream session, concurrently because a
// close may wait for an unresponsive upstream.
func (g *Gateway) disconnectAll() {
	g.mu.Lock()
	var conns []*upstreamConn
	for _, u := range g.upstreams {
		if u.conn != nil {
			conns = append(conns, u.conn)
			u.conn = nil
			u.lastErr = "gateway stopped"
		}
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.close)
	}
	wg.Wait()
}

// requestRound asks Run for an early round without blocking.
func (g *Gateway) requestRound() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// minLevel drops records below level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
