package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-mcp/berth/internal/logging"
	"github.com/berth-mcp/berth/internal/version"
)

// env carries the process environment and streams to every subcommand.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// openBrowser shows a URL to the user in a browser; tests replace it.
	openBrowser func(url string) error
}

func newRootCmd(e *env) *cobra.Command {
	getenv, stdin, stdout, stderr := e.getenv, e.stdin, e.stdout, e.stderr
	root := &cobra.Command{
		Use:           "berth",
		Short:         "berth gives AI agents real development sandboxes over MCP",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return envFallback(cmd.Flags(), getenv)
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newVersionCmd(e),
		newServeCmd(e),
		newMigrateCmd(e),
		newTokenCmd(e),
		newUserCmd(e),
		newLoginCmd(e),
		newLogoutCmd(e),
		newWhoamiCmd(e),
		newMCPCmd(e),
		newClientsCmd(e),
		newServersCmd(e),
		newStartCmd(e),
		newNetworkCmd(e),
		newStopCmd(e),
		newExecCmd(e),
		newShellCmd(e),
		newCpCmd(e),
		newOpsCmd(e),
		newTokensCmd(e),
		newDocsCmd(e, func() *cobra.Command { return root }),
	)
	return root
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the berth version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(e.stdout, version.Version)
			return err
		},
	}
}

// envFallback fills every flag not given on the command line from
// BERTH_<NAME> (dashes become underscores), e.g. --database-url from
// BERTH_DATABASE_URL, and marks it as set from the environment.
func envFallback(flags *pflag.FlagSet, getenv func(string) string) error {
	var firstErr error
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		key := "BERTH_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(key); v != "" {
			if err := flags.Set(f.Name, v); err != nil {
				firstErr = fmt.Errorf("%s=%q: %w", key, v, err)
				return
			}
			firstErr = flags.SetAnnotation(f.Name, fromEnvAnnotation, []string{key})
		}
	})
	return firstErr
}

func (e *env) logger(level string) *slog.Logger { return logging.New(e.stderr, level) }
