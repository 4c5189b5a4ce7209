package session

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

const (
	// termGrace is how long a timed-out command has between SIGTERM and
	// SIGKILL.
	termGrace = 2 * time.Second
	// killGrace is how long each later step of a timeout waits for the
	// shell to report before the next, harder one.
	killGrace = 500 * time.Millisecond
	// drainDelay bounds how long output is still read once the shell is
	// gone (see shell.drainAfterExit).
	drainDelay = 500 * time.Millisecond
	// killWait bounds how long ending a shell waits for the killed
	// processes to be gone.
	killWait = 2 * time.Second
	// timeoutExitCode is the exit code of a call that timed out, as
	// timeout(1) reports it.
	timeoutExitCode = 124
)

// Steps of ending a command that ran out of time. The shell survives all
// but the last; only a command that keeps the shell itself busy beyond
// the reach of its SIGUSR1 trap costs the shell and its state.
const (
	stepRunning   = iota
	stepTermed    // interrupted the shell, SIGTERM to what the call started
	stepKilled    // interrupted again, SIGKILL to what the call started
	stepKilledAll // SIGKILL to every job of the shell, older ones too
	stepShellGone // the shell itself was killed
)

// newNonce returns a marker no command can know before its call starts.
func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make call marker: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// protocolLine is what the shell reads for one call. bash reads its
// script from a pipe one byte at a time (it must not read past a line a
// command might want), a system call per byte, so the line is kept short:
// what can run outside the command's own scope runs in endFunc, defined
// once by shellInit.
//
// The shell sources the command file itself. (eval "$(< file)" would word
// errors as "bash: line N" with N counting every protocol line so far;
// sourcing names the file but counts lines right.) The source runs at top
// level, not in a function, so that declare and return in a command mean
// what they mean in a script, and in a one-pass loop so that the shell's
// SIGUSR1 trap ("break 1000", see shellInit) can abandon the rest of the
// command on a timeout, the way Ctrl-C abandons a command line in a
// terminal.
//
// The line runs with stderr on /dev/null, and the command's stderr and
// both markers go to the shell's own copies of its stdout and stderr (fds
// 62 and 63, see shellInit). So a command's "set -x" neither traces the
// protocol into its output nor prints the marker early, and a command's
// "exec >file" does not swallow the marker. The command itself runs with
// 62 and 63 closed (bash keeps them meanwhile on descriptors that are
// close-on-exec, and puts them back when the source returns), so it and
// whatever it starts hold their stdio and nothing else. The nonce is
// passed in two halves that printf joins, so no trace or $BASH_COMMAND
// ever holds the marker itself.
func protocolLine(sh *shell, nonce string) string {
	half := len(nonce) / 2
	return "{ for _ in 1; do builtin . " + shellQuote(sh.commandPath()) + " 2>&63 62>&- 63>&-; done;" +
		endFunc + " " + nonce[:half] + " " + nonce[half:] + " \"$?\"; } 2>/dev/null\n"
}

// endFunc names the shell function that ends a call. First it puts the
// process groups of the shell's jobs in a file that a later timeout reads
// to spare them; then it prints the markers, each stream in one write,
// stdout's last and carrying the command's status ($3). The order is for
// the tail latency: each marker wakes the agent, which on a busy machine
// can take the CPU from bash; with the stdout marker last, a woken agent
// waits for nothing more (printed the other way round, 1% of calls
// waited milliseconds for bash's next write). A command that
// redefines or unsets it breaks only its own session, as "exec 62>&-"
// would: the call then ends by its timeout, which restarts the shell.
const endFunc = "__berth_end"

func endFuncDef(sh *shell) string {
	return endFunc + "() { builtin jobs -p >|" + shellQuote(sh.jobsPath()) + ";" +
		"builtin printf %s%s \"$1\" \"$2\" >&63;builtin printf '%s%s %d\\n' \"$1\" \"$2\" \"$3\" >&62; }\n"
}

// callOutcome is the raw result of one call on a shell.
type callOutcome struct {
	res wire.BashResult
	// died means the shell is gone and the session needs a new one.
	died bool
}

// run executes command in the shell and collects its result. The command
// runs in the shell itself, so cd, variables and functions persist. After
// it the shell prints the call's nonce and $? on stdout and the nonce on
// stderr; a call ends when both markers are in, or when the shell is gone.
//
// run returns an error only when the call could not be started or ctx
// ended; in the latter case the command was ended as on a timeout.
func (sh *shell) run(ctx context.Context, command string, timeout time.Duration, limit int64) (callOutcome, error) {
	nonce, err := newNonce()
	if err != nil {
		return callOutcome{}, err
	}
	if err := sh.writeCommand(command); err != nil {
		return callOutcome{}, err
	}
	line := protocolLine(sh, nonce)

	// What background jobs printed since the last call comes first; it
	// predates the nonce, so it cannot hold the marker.
	stdout := &lazyBuffer{limit: limit}
	stderr := &lazyBuffer{limit: limit}
	id := sh.pauseIdle()
	early, droppedOut := id.out.bytes()
	stdout.Write(early)
	early, droppedErr := id.err.bytes()
	stderr.Write(early)
	outScan := newScanner([]byte(nonce), stdout)
	errScan := newScanner([]byte(nonce), stderr)

	start := time.Now()
	// A failed write means the shell is gone; its streams end and the
	// loop below reports its exit status.
	sh.script.WriteString(line)

	c := call{sh: sh, start: start, droppedOut: droppedOut, droppedErr: droppedErr}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	out, errc, exited, done := sh.out, sh.errc, sh.exited, ctx.Done()
	var ctxErr error
	for {
		status, statusOK := parseStatus(outScan)
		if statusOK && errScan.found {
			sh.resumeIdle(status.rest, errScan.after)
			return c.result(stdout, stderr, status.code, false), ctxErr
		}
		if out == nil && errc == nil {
			break
		}
		select {
		case p, ok := <-out:
			if !ok {
				out = nil
				continue
			}
			outScan.feed(p)
		case p, ok := <-errc:
			if !ok {
				errc = nil
				continue
			}
			errScan.feed(p)
		case <-exited:
			exited = nil
			sh.drainAfterExit()
		case <-timer.C:
			if c.step == stepRunning {
				c.timedOut = true
			}
			if c.escalate() {
				timer.Reset(c.nextWait())
			}
		case <-done:
			done = nil
			ctxErr = fmt.Errorf("command cancelled: %w", ctx.Err())
			if c.step == stepRunning && c.escalate() {
				timer.Reset(c.nextWait())
			}
		}
	}

	// Both streams ended without the markers: the shell exited, or it
	// closed its own stdout and stderr and is of no further use.
	outScan.flush()
	errScan.flush()
	select {
	case <-sh.exited:
	case <-time.After(drainDelay):
		sh.kill()
		<-sh.exited
	}
	return c.result(stdout, stderr, sh.exitCode, true), ctxErr
}

// call tracks the timeout steps of one run.
type call struct {
	sh       *shell
	start    time.Time
	step     int
	timedOut bool
	// Bytes of background output dropped between calls, counted as
	// truncated.
	droppedOut, droppedErr int64
	since                  uint64 // boot tick the call began at
	oldJobs                []int  // process groups of the jobs from earlier calls
}

// escalate takes the next step of ending a command that ran out of time
// and reports whether there is a later step to wait for.
func (c *call) escalate() bool {
	switch c.step {
	case stepRunning:
		// The interrupt goes first so that the trap is pending when the
		// killed job ends and the shell moves on.
		c.since = c.startTick()
		c.oldJobs = c.sh.jobs()
		c.sh.interrupt()
		groups, pids := commandTargets(c.sh.pid, c.oldJobs, c.since, false)
		signalTargets(groups, pids, syscall.SIGTERM)
	case stepTermed:
		c.sh.interrupt()
		groups, pids := commandTargets(c.sh.pid, c.oldJobs, c.since, false)
		signalTargets(groups, pids, syscall.SIGKILL)
	case stepKilled:
		groups, pids := commandTargets(c.sh.pid, nil, 0, true)
		signalTargets(groups, pids, syscall.SIGKILL)
	case stepKilledAll:
		c.sh.kill()
	default:
		return false
	}
	c.step++
	return c.step < stepShellGone
}

func (c *call) nextWait() time.Duration {
	if c.step == stepTermed {
		return termGrace
	}
	return killGrace
}

// startTick converts the call's start into boot clock ticks, one tick
// early so that rounding never spares a process the call started.
func (c *call) startTick() uint64 {
	now, err := bootTicks()
	if err != nil {
		return 0 // cannot tell old jobs apart: treat all as the call's
	}
	elapsed := uint64(time.Since(c.start) / (10 * time.Millisecond))
	if elapsed+1 >= now {
		return 0
	}
	return now - elapsed - 1
}

// result puts the call's outcome together; a command that was ended
// reports the exit code of timeout(1) rather than that of its death.
func (c *call) result(stdout, stderr *lazyBuffer, code int, died bool) callOutcome {
	if c.step != stepRunning {
		code = timeoutExitCode
	}
	return callOutcome{
		res: wire.BashResult{
			Stdout:               stdout.String(),
			Stderr:               stderr.String(),
			ExitCode:             code,
			DurationMS:           time.Since(c.start).Milliseconds(),
			TimedOut:             c.timedOut,
			StdoutTruncatedBytes: stdout.Omitted() + c.droppedOut,
			StderrTruncatedBytes: stderr.Omitted() + c.droppedErr,
		},
		died: died,
	}
}

// status is what follows the marker on stdout: " <$?>\n".
type status struct {
	code int
	rest []byte // output after the status line (from background jobs)
}

func parseStatus(s *scanner) (status, bool) {
	if !s.found {
		return status{}, false
	}
	i := bytes.IndexByte(s.after, '\n')
	if i < 0 {
		return status{}, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(s.after[:i])))
	if err != nil {
		code = -1
	}
	return status{code: code, rest: s.after[i+1:]}, true
}
