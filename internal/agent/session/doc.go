// Package session owns berth-agent's persistent bash sessions: one
// long-lived shell per session id, whose working directory, variables and
// functions carry over from call to call.
//
// Each call writes its command to a private file and sends the shell one
// protocol line that sources it and then prints an end marker on stdout
// (with $?) and on stderr. The marker holds a fresh random nonce, so no
// command can end a call early by printing something marker-like, and it
// is removed from the output. Commands get /dev/null as stdin; bash reads
// the protocol from another descriptor.
//
// A call that runs out of time is ended the way Ctrl-C ends a command
// line: the shell abandons the rest of the command (a SIGUSR1 trap breaks
// out of a loop around it), and the process groups the call started get
// SIGTERM, then SIGKILL. Jobs started by earlier calls are spared, and the
// shell and its state survive; only a command that keeps the shell itself
// busy beyond reach costs the shell, and the next call then reports
// session_reset. The same holds when a command ends the shell ("exit", or
// "set -e" and a failure, as in a terminal).
//
// Ending a session (Delete, Reset, Close, the idle reaper) kills the
// shell and everything it started, including processes that left its
// process tree (found by an environment tag), and waits until they are
// gone.
package session
