package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/version"
)

func newMCPCmd(e *env) *cobra.Command {
	var cfg, logLevel string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve berth's MCP tools on stdio for desktop clients, relaying to the server",
		Long: "Run an MCP server on stdin/stdout that mirrors the tools and prompts of <server>/mcp and forwards every call " +
			"there, for clients that only start local servers, e.g. {\"command\": \"berth\", \"args\": [\"mcp\"]}. " +
			"Credentials come from BERTH_URL and BERTH_TOKEN, else from `berth login`. Logs go to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := credentials(e.getenv, cfg)
			if err != nil {
				return err
			}
			return serveMCPRelay(cmd.Context(), c, e.stdin, e.stdout, e.logger(logLevel))
		},
	}
	configFlag(cmd, &cfg)
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	return cmd
}

// serveMCPRelay connects to the server's /mcp, mirrors it on a stdio MCP
// server, and serves until stdin ends or ctx is cancelled.
//
// Versions are the go-sdk's on stdio, as on the HTTP endpoint: a
// 2026-07-28 client uses server/discover and per-request _meta, and the
// legacy initialize handshake answers at most 2025-11-25, the newest
// version that has it. Tasks are not relayed, so none are advertised:
// the go-sdk client the relay forwards through has no tasks API, and
// relaying them would mean passing tasks/* and task-augmented calls to
// the remote as raw JSON-RPC beside the SDK's session. A tool call over
// stdio runs to its result, with progress; a client that wants durable
// tasks (any replica answers, they outlive the connection) connects to
// <server>/mcp over HTTP, where they are served.
func serveMCPRelay(ctx context.Context, c *remote, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := newRelay(c.URL, log)
	remote, err := r.connect(ctx, c)
	if err != nil {
		return err
	}
	defer remote.Close()
	r.remote = remote

	info := &mcp.Implementation{Name: "berth", Title: "berth sandboxes", Version: version.Version}
	var instructions string
	if init := remote.InitializeResult(); init != nil {
		instructions = init.Instructions
		if init.ServerInfo != nil {
			info = init.ServerInfo
		}
	}
	r.local = mcp.NewServer(info, &mcp.ServerOptions{Instructions: instructions, Logger: log, HasTools: true, HasPrompts: true})
	if err := r.syncTools(ctx); err != nil {
		return err
	}
	if err := r.syncPrompts(ctx); err != nil {
		return err
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.refreshLoop(ctx)
	}()
	defer wg.Wait()
	defer cancel()

	err = r.local.Run(ctx, drainingTransport{&mcp.IOTransport{Reader: readCloser(stdin), Writer: nopWriteCloser{stdout}}})
	if ctx.Err() != nil || clientGone(err) {
		// Interrupted, or the client closed stdin or stdout: a normal end.
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp on stdio: %w", err)
	}
	return nil
}

// connect opens the client session to the server's /mcp. When that
// fails, GET /api/whoami tells apart a wrong URL, a refused token and an
// unreachable server better than the MCP handshake's error does.
func (r *relay) connect(ctx context.Context, c *remote) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "berth-mcp-relay", Version: version.Version}, &mcp.ClientOptions{
		Logger:                   r.log,
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { markDirty(r.toolsDirty) },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { markDirty(r.promptsDirty) },
		// Progress is forwarded by progressTap, in order with results.
	})
	hc := *c.HTTP()
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &progressTap{base: base, routes: &r.progress}
	remote, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.URL + "/mcp", HTTPClient: &hc}, nil)
	if err == nil {
		return remote, nil
	}
	if _, werr := fetchWhoami(ctx, c); werr != nil {
		return nil, fmt.Errorf("connect to %s/mcp: %w", c.URL, werr)
	}
	return nil, fmt.Errorf("connect to %s/mcp: %w", c.URL, err)
}

// markDirty marks a list as needing a refresh without blocking the SDK's
// notification delivery; several notifications fold into one refresh.
func markDirty(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// clientGone reports the errors that mean the other end of stdio went
// away, which is how desktop clients end a session.
func clientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// nopWriteCloser keeps stdout open when the session ends: it belongs to
// the process, not to the session.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
