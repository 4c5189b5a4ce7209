package catalog

import (
	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/wire"
)

// Inputs and answers of operations whose service methods take or give
// plain values; every other operation uses the service's own request
// and answer types.

// Empty is the input of operations that take none.
type Empty struct{}

// ServerInput names a server.
type ServerInput struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
}

// ClientInput names a client.
type ClientInput struct {
	ClientID string `json:"client_id" jsonschema:"the client"`
}

// ClientRef names a client the way IdeGYM's tools do, with its
// namespace.
type ClientRef struct {
	ClientID  string `json:"client_id" jsonschema:"the client"`
	Namespace string `json:"namespace,omitempty" jsonschema:"ignored; accepted for IdeGYM compatibility"`
}

// ListServersInput filters list_servers.
type ListServersInput struct {
	ClientID string `json:"client_id,omitempty" jsonschema:"only this client's servers"`
}

// LogsInput asks for the end of a server's agent log.
type LogsInput struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Tail     int    `json:"tail,omitempty" jsonschema:"number of last lines, 1 to 10000 (default 200)"`
}

// ServerLogs is the end of a server's agent log.
type ServerLogs struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Logs     string `json:"logs" jsonschema:"the last lines of its agent's log"`
}

// OperationsInput asks for a server's latest operations.
type OperationsInput struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many, 1 to 100 (default 10)"`
}

// RestartInput restarts a server.
type RestartInput struct {
	orchestrator.ServerRef
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) and return the finished operation inline"`
}

// OperationInput asks for an operation.
type OperationInput struct {
	OperationID string  `json:"operation_id" jsonschema:"the operation"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) for it to finish"`
}

// OperationsPageInput pages through the caller's operations.
type OperationsPageInput struct {
	orchestrator.OperationFilter
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
	Limit  int    `json:"limit,omitempty" jsonschema:"operations per page, 1 to 100 (default 50)"`
}

// OperationRef names an operation.
type OperationRef struct {
	OperationID string `json:"operation_id" jsonschema:"the operation"`
}

// SessionExecInput runs a command in a persistent shell: of a server, or
// of the caller's sandbox for a session.
type SessionExecInput struct {
	ServerID string `json:"server_id,omitempty" jsonschema:"the server to run in; without it the command runs in your sandbox for session (or the X-Session-ID header), which berth starts on the first call and reuses after"`
	Session  string `json:"session,omitempty" jsonschema:"persistent shell to run in (an RFC 1123 label; default \"default\", or with no server_id the X-Session-ID header); cwd, variables and functions persist per session"`
	wire.SessionExecRequest
	Network *egress.Policy `json:"network,omitempty" jsonschema:"without server_id: the network policy of the session's sandbox when this call starts it (default: the operator's)"`
}

// SessionInput names one of the caller's sessions.
type SessionInput struct {
	Session string `json:"session,omitempty" jsonschema:"the session (default: the X-Session-ID header)"`
}

// ClientList is list_clients' answer.
type ClientList struct {
	Clients []orchestrator.Client `json:"clients" jsonschema:"your clients"`
}

// ServerList is list_servers' answer.
type ServerList struct {
	Servers []orchestrator.Server `json:"servers" jsonschema:"your servers"`
}

// OperationList is list_server_operations' answer.
type OperationList struct {
	Operations []orchestrator.Operation `json:"operations" jsonschema:"newest first"`
}
