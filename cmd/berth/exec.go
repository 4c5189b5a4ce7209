package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// exitCode is a command that ran and exited non-zero: berth exits with
// its code and says nothing more.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// shellQuote quotes args for bash so that they arrive as given.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// printResult writes a command's output to the streams and returns its
// exit code as an error (nil for 0).
func printResult(e *env, res wire.BashResult) error {
	io.WriteString(e.stdout, res.Stdout)
	io.WriteString(e.stderr, res.Stderr)
	if res.StdoutTruncatedBytes > 0 || res.StderrTruncatedBytes > 0 {
		fmt.Fprintf(e.stderr, "berth: output cut: %d bytes of stdout and %d of stderr left out in the middle\n", res.StdoutTruncatedBytes, res.StderrTruncatedBytes)
	}
	if res.TimedOut {
		fmt.Fprintln(e.stderr, "berth: the command was killed at its timeout")
	}
	if res.ExitCode != 0 {
		return exitCode(res.ExitCode)
	}
	return nil
}

func newExecCmd(e *env) *cobra.Command {
	var (
		cc      clientCmd
		cwd     string
		timeout time.Duration
		envVars []string
	)
	cmd := &cobra.Command{
		Use:   "exec SERVER -- COMMAND [ARG...]",
		Short: "Run a command on a server and exit with its exit code",
		Long: "Run a one-shot command in a server's workspace (run_bash_command). One argument after -- is a bash script as " +
			"given; several are quoted, so they arrive as separate words. Its stdout and stderr go to yours as it writes them " +
			"and berth exits with its exit code.\n\nLong output keeps its head and tail: the head appears as it is written, " +
			"the tail when the command ends. With -o json the whole result is printed when the command ends.",
		Example: "  berth exec 5b1f… -- go test ./...\n  berth exec 5b1f… -- 'cd src && make 2>&1 | tail'\n  berth exec 5b1f… -o json -- uname -a",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return wire.Errorf(wire.CodeBadRequest, "want a server and a command: berth exec SERVER -- COMMAND")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			script := args[1]
			if len(args) > 2 {
				script = shellQuote(args[1:])
			}
			in := map[string]any{"server_id": args[0], "command": script, "cwd": cwd, "command_timeout": timeout.Seconds()}
			if err := envInput(in, envVars); err != nil {
				return err
			}
			// -o json prints the whole result, which the operation keeps.
			if cc.out != "json" {
				return streamExec(cmd.Context(), e, r, args[0], in, timeout+time.Minute)
			}
			op, err := runOperation(cmd.Context(), e, r, "run_bash_command", in, "running on "+args[0], timeout+time.Minute, false)
			if err != nil {
				return err
			}
			var res wire.BashResult
			if err := jsonInto(op.Result, &res); err != nil {
				return err
			}
			if err := writeJSON(e.stdout, jsonRaw(op.Result)); err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return exitCode(res.ExitCode)
			}
			return nil
		},
	}
	cc.register(cmd)
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default: the workspace)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "kill the command after this long")
	cmd.Flags().StringArrayVar(&envVars, "env", nil, "NAME=VALUE for the command's environment (repeatable)")
	return cmd
}

func newShellCmd(e *env) *cobra.Command {
	var (
		cc      clientCmd
		session string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "shell SERVER",
		Short: "An interactive shell on a server, over its persistent session",
		Long: "Read command lines from stdin and run each in a persistent shell of the server (the bash operation): the " +
			"working directory, variables and functions carry over from line to line, and agents using the same --session " +
			"see them too. Works with a pipe as well as a terminal; exits at end of input with the last command's exit code. " +
			"Each line's output appears when it ends.",
		Example: "  berth shell 5b1f…\n  printf 'cd src\\nmake test\\n' | berth shell 5b1f…\n  berth shell 5b1f… --session agent-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := cc.remote(e)
			if err != nil {
				return err
			}
			tty := isTerminal(e.stdout) && isStdinTerminal(e.stdin)
			sc := bufio.NewScanner(e.stdin)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			var last error
			for {
				if tty {
					fmt.Fprintf(e.stdout, "berth:%s$ ", args[0])
				}
				if !sc.Scan() {
					break
				}
				line := strings.TrimSpace(sc.Text())
				if line == "" {
					continue
				}
				if tty && (line == "exit" || line == "logout") {
					break
				}
				var res orchestrator.SessionBashResult
				raw, err := callOp(cmd.Context(), r, "bash", map[string]any{
					"server_id": args[0], "session": session, "command": line, "timeout": timeout.Seconds(),
				}, &res)
				if err != nil {
					return err
				}
				if cc.out == "json" {
					writeJSON(e.stdout, jsonRaw(raw))
				} else {
					io.WriteString(e.stdout, res.Stdout)
					io.WriteString(e.stderr, res.Stderr)
					if res.SessionReset {
						fmt.Fprintln(e.stderr, "berth: the session's shell had died; this line ran in a new one (cwd and variables were lost)")
					}
				}
				last = nil
				if res.ExitCode != 0 {
					last = exitCode(res.ExitCode)
				}
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			return last
		},
	}
	cc.register(cmd)
	cmd.Flags().StringVar(&session, "session", "cli", "the persistent shell to use (an RFC 1123 label)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "kill a line's command after this long (the shell survives)")
	return cmd
}

// isStdinTerminal reports whether r is a terminal.
func isStdinTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}
