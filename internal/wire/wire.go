// Package wire holds the JSON types exchanged between the berth server and
// berth-agent. It is the only code the two binaries share, so it must stay
// free of dependencies beyond the standard library.
package wire

import "strconv"

// Error is the body of every non-2xx answer from the agent and the server:
// {"error": {"code": "...", "message": "..."}}.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names what went wrong. Code is a stable machine-readable word
// (bad_request, unauthorized, forbidden, not_found, conflict, too_large,
// bad_gateway, gateway_timeout, unavailable, internal, ...); Message is for
// people and agents.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Default limits for a one-shot bash call, shared by the agent (which
// applies them) and the server (which documents them).
const (
	DefaultCommandTimeoutSeconds      = 600
	DefaultGracefulTerminationSeconds = 2
	DefaultMaxOutputBytes             = 1 << 20
)

// BashRequest is the body of POST /api/tools/bash (IdeGYM semantics).
//
// MaxOutputBytes tells an explicit JSON null (unlimited) from an absent
// field (the 1 MiB default); resolve it with MaxOutputBytes.Limit.
type BashRequest struct {
	Command                    string            `json:"command"`
	CommandTimeout             *float64          `json:"command_timeout,omitempty"`
	GracefulTerminationTimeout *float64          `json:"graceful_termination_timeout,omitempty"`
	MaxOutputBytes             OptionalInt64     `json:"max_output_bytes,omitzero"`
	Cwd                        string            `json:"cwd,omitempty"`
	Env                        map[string]string `json:"env,omitempty"`
	User                       string            `json:"user,omitempty"`
	StripOutput                bool              `json:"strip_output,omitempty"`
	// Operation is berth's: set for run_bash_command, never by a caller.
	Operation
}

// Operation ties a command to the berth operation it runs for. With an id,
// the agent runs the command apart from the request that asked for it,
// keeps its answer until berth releases it (DELETE /api/operations/{id})
// or a TTL passes, and answers a repeated request with the same id with
// that answer (waiting for it while the command runs) instead of running
// the command again: a replica that takes over an operation whose replica
// died gets the real outcome of the one run.
type Operation struct {
	OperationID string `json:"operation_id,omitempty"`
	// OperationAgeMS is sent by a replica that takes the operation over:
	// how long ago, at least, berth recorded it. An agent that does not
	// know the id, and either started less than that long ago or has
	// since let go of an answer berth never released, cannot tell whether
	// it ran the command: it answers conflict, saying so, rather than run
	// the command a second time.
	OperationAgeMS int64 `json:"operation_age_ms,omitempty"`
}

// MaxOperationIDBytes bounds an operation id: berth's are UUIDs.
const MaxOperationIDBytes = 64

// OmittedMarker is the line put in a stream of a BashResult where
// omitted bytes were dropped (head and tail are kept).
func OmittedMarker(omitted int64) string {
	return "\n[... " + strconv.FormatInt(omitted, 10) + " bytes omitted ...]\n"
}

// BashResult is the answer of a one-shot or session bash call. A timeout or
// a non-zero exit code is a result, not an error.
type BashResult struct {
	Stdout               string `json:"stdout" jsonschema:"the command's standard output (head and tail when it was longer than the limit)"`
	Stderr               string `json:"stderr" jsonschema:"the command's standard error (head and tail when it was longer than the limit)"`
	ExitCode             int    `json:"exit_code" jsonschema:"the exit status; a non-zero one is a result, not an error"`
	DurationMS           int64  `json:"duration_ms" jsonschema:"how long the command ran, in milliseconds"`
	TimedOut             bool   `json:"timed_out" jsonschema:"the command was killed at its timeout"`
	StdoutTruncatedBytes int64  `json:"stdout_truncated_bytes" jsonschema:"bytes of stdout left out in the middle"`
	StderrTruncatedBytes int64  `json:"stderr_truncated_bytes" jsonschema:"bytes of stderr left out in the middle"`
	// SessionReset is set by session calls when the session's shell had
	// died and this call ran in a new one (cwd and variables were lost).
	SessionReset bool `json:"session_reset,omitempty" jsonschema:"the session's shell had died and this call ran in a new one: its cwd and variables were lost"`
	// Truncated says that stdout or stderr lost bytes in the middle
	// (their *_truncated_bytes count them): set by FitOutput, so every
	// result berth returns says it, whoever trimmed.
	Truncated bool `json:"truncated,omitempty" jsonschema:"stdout or stderr was longer than the limit and lost bytes in the middle (counted in stdout_truncated_bytes and stderr_truncated_bytes)"`
	// EgressRefused is set by berth, never the agent: connections its
	// egress gateway refused the sandbox while a command that failed ran.
	EgressRefused []string `json:"egress_refused,omitempty" jsonschema:"connections the sandbox's network policy refused while the command ran, with the rule that refused each (a likely reason it failed; set_server_network changes the policy)"`
}

// MaxSessionTimeoutSeconds bounds one command in a persistent shell: the
// shell is held for the whole command, and a longer one belongs in a
// one-shot command (run_bash_command) that an operation tracks.
const MaxSessionTimeoutSeconds = 3600

// DefaultSessionTimeoutSeconds is a session command's timeout when the
// request gives none.
const DefaultSessionTimeoutSeconds = 60

// SessionExecRequest is the body of POST /api/sessions/{id}/exec.
type SessionExecRequest struct {
	Command string `json:"command" jsonschema:"bash command line, run in the session's shell"`
	// Timeout in seconds; 0 means the agent default (60).
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds before the command is killed (default 60, at most 3600); the shell and its state survive a timeout"`
	// MaxOutputBytes limits each stream like BashRequest.MaxOutputBytes.
	MaxOutputBytes OptionalInt64 `json:"max_output_bytes,omitzero" jsonschema:"bytes kept per stream, head and tail (default 1048576); null and values above the server's cap mean the cap (4194304 unless the operator set another)"`
}

// SessionInfo describes one persistent shell session.
type SessionInfo struct {
	ID        string `json:"id"`
	PID       int    `json:"pid"`
	Cwd       string `json:"cwd,omitempty"`
	CreatedAt string `json:"created_at"`
	LastUsed  string `json:"last_used_at"`
	Busy      bool   `json:"busy"`
	Calls     int64  `json:"calls"`
}

// SessionList is the answer of GET /api/sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// Health is the answer of GET /api/health.
type Health struct {
	Status string `json:"status"`
}

// Capabilities is the answer of GET /api/capabilities.
type Capabilities struct {
	Version   string         `json:"version"`
	Workspace string         `json:"workspace"`
	Features  []string       `json:"features"`
	Upstreams []UpstreamInfo `json:"upstreams"`
	// Isolation says how the sandbox is isolated, as far as the agent can
	// tell ("none" when it runs as a plain process).
	Isolation string `json:"isolation,omitempty"`
}

// UpstreamInfo describes one MCP upstream proxied by the agent's gateway.
type UpstreamInfo struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Connected bool   `json:"connected"`
	Tools     int    `json:"tools"`
	LastError string `json:"last_error,omitempty"`
}
