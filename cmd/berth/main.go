// Command berth is the berth server and its command-line client: `berth
// serve` runs the orchestrator, the other commands manage tokens and users
// and talk to a running server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	var code exitCode
	if errors.As(err, &code) {
		// A command run by berth exec or berth shell exited so; it
		// said why itself.
		os.Exit(int(code))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		os.Exit(1)
	}
}

// run is main without the process: tests call it with their own
// arguments, environment and streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runEnv(ctx, &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, openBrowser: openBrowser}, args)
}

// runEnv is run in a given environment.
func runEnv(ctx context.Context, e *env, args []string) error {
	root := newRootCmd(e)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
