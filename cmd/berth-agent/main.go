// Command berth-agent runs inside a sandbox and executes what the berth
// server asks for: bash commands, persistent shell sessions, file edits,
// test rewards and calls to in-sandbox MCP servers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-mcp/berth/internal/agent"
	"github.com/berth-mcp/berth/internal/fds"
	"github.com/berth-mcp/berth/internal/logging"
	"github.com/berth-mcp/berth/internal/sandbox"
	"github.com/berth-mcp/berth/internal/version"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == installCommand {
		if err := install(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "berth-agent:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		// pid 1 of a local sandbox: it only returns on failure.
		err := sandbox.Init(os.Stderr)
		fmt.Fprintln(os.Stderr, "berth-agent sandbox-init:", err)
		os.Exit(125)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, fds.CloseInherited); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "berth-agent:", err)
		}
		os.Exit(1)
	}
}

// run runs the agent. closeInherited, when set, is given the inherited
// descriptors the flags name (the listener, the token) once the flags are
// read, before anything is opened: main passes fds.CloseInherited, so
// that no other descriptor the agent inherited reaches its commands.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, closeInherited func(keep ...int) error) error {
	fs := flag.NewFlagSet("berth-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		listen        = fs.String("listen", "127.0.0.1:7070", "address to listen on: host:port, unix:/path/to.sock, or fd:N for an inherited listening socket")
		workspace     = fs.String("workspace", "", "workspace directory the tools work in (required)")
		commandDir    = fs.String("command-dir", "", "directory commands and shell sessions start in when they name none (default: the workspace)")
		commandUser   = fs.String("command-user", "", "user run_bash commands run as when they name none: name, uid, name:group or uid:gid (default: the agent's)")
		tokenFile     = fs.String("token-file", "", "file holding the bearer token (>= 32 bytes, no whitespace); or set BERTH_AGENT_TOKEN")
		tokenFD       = fs.Int("token-fd", 0, "inherited descriptor to read the bearer token from (how a sandbox's init passes it)")
		upstreams     = fs.String("upstreams-dir", "", "directory of *.json MCP upstream declarations to proxy at /mcp")
		allowOutside  = fs.Bool("allow-outside-workspace", false, "let file tools reach paths outside the workspace")
		insecure      = fs.Bool("insecure-no-auth", false, "serve without a token (local debugging only)")
		idle          = fs.Duration("session-idle-timeout", 30*time.Minute, "end shell sessions unused this long")
		testCommand   = fs.String("test-command", "", "default command for POST /api/rewards/test")
		testReports   = fs.String("test-reports", "", "comma-separated globs of JUnit XML reports for rewards")
		maxRequest    = fs.Int64("max-request-bytes", 16<<20, "largest accepted JSON request body")
		maxArchive    = fs.Int64("max-archive-bytes", 1<<30, "largest accepted tar upload (uncompressed)")
		isolation     = fs.String("isolation", "", "how this sandbox is isolated, reported in /api/capabilities")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error")
		shutdownGrace = fs.Duration("shutdown-grace", 10*time.Second, "how long running requests may take to finish at shutdown")
		showVersion   = fs.Bool("version", false, "print the version and exit")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := envFallback(fs, getenv); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Version)
		return nil
	}
	if closeInherited != nil {
		if err := closeInherited(passedFDs(*listen, *tokenFD)...); err != nil {
			return err
		}
	}
	log := logging.New(stderr, *logLevel)

	token, err := loadToken(*tokenFile, *tokenFD, getenv("BERTH_AGENT_TOKEN"), *insecure)
	if err != nil {
		return err
	}
	var reports []string
	if *testReports != "" {
		reports = strings.Split(*testReports, ",")
	}
	a, err := agent.New(agent.Config{
		Workspace:             *workspace,
		CommandDir:            *commandDir,
		CommandUser:           *commandUser,
		Token:                 token,
		InsecureNoAuth:        *insecure,
		UpstreamsDir:          *upstreams,
		AllowOutsideWorkspace: *allowOutside,
		SessionIdleTimeout:    *idle,
		TestCommand:           *testCommand,
		TestReports:           reports,
		MaxRequestBytes:       *maxRequest,
		MaxArchiveBytes:       *maxArchive,
		Isolation:             *isolation,
		Version:               version.Version,
		Logger:                log,
	})
	if err != nil {
		return err
	}
	ln, err := agent.Listen(*listen)
	if err != nil {
		a.Close()
		return err
	}
	return a.Serve(ctx, ln, *shutdownGrace)
}

// passedFDs are the descriptors the flags say the agent was handed.
func passedFDs(listen string, tokenFD int) []int {
	var keep []int
	if n, ok := strings.CutPrefix(listen, "fd:"); ok {
		if fd, err := strconv.Atoi(n); err == nil {
			keep = append(keep, fd)
		}
	}
	if tokenFD != 0 {
		keep = append(keep, tokenFD)
	}
	return keep
}

// loadToken applies the token rules: a file wins over the environment; no
// token at all is refused unless auth is explicitly off.
func loadToken(file string, fd int, env string, insecure bool) (string, error) {
	switch {
	case fd != 0:
		return agent.ReadTokenFD(fd)
	case file != "":
		return agent.ReadTokenFile(file)
	case env != "":
		if err := agent.CheckToken(env); err != nil {
			return "", fmt.Errorf("BERTH_AGENT_TOKEN: %w", err)
		}
		return env, nil
	case insecure:
		return "", nil
	default:
		return "", errors.New("no token: pass --token-file FILE or set BERTH_AGENT_TOKEN (refusing to serve without authentication; --insecure-no-auth is for local debugging)")
	}
}

// envFallback fills every flag not given on the command line from
// BERTH_AGENT_<NAME> (dashes become underscores).
func envFallback(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		key := "BERTH_AGENT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(key); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", key, v, err))
			}
		}
	})
	return errors.Join(errs...)
}
