package console

import (
	"encoding/json"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/wire"
)

// The data of the console's pages that show the orchestrator's types (the
// web package knows none of them): what each template reads.

// serversData is the sandboxes page.
type serversData struct {
	Servers []orchestrator.Server
	Clients []orchestrator.Client
	// ClientNames names each server's client.
	ClientNames map[string]string
	// LiveClients are those a new server may be started for.
	LiveClients []orchestrator.Client
	Images      []string
	MCPURL      string
	// Network is the start form's network choice: the operator's default
	// selected; nil on a runtime that enforces no network policies.
	Network *egress.Policy
}

// operationView is an operation with its result and error, clipped.
type operationView struct {
	orchestrator.Operation
	ResultText Clipped
	ErrorText  Clipped
	// ExitCode is a command's exit status, when the result has one.
	ExitCode *int
}

func operationViews(ops []orchestrator.Operation) []operationView {
	out := make([]operationView, len(ops))
	for i, op := range ops {
		out[i] = operationView{Operation: op, ResultText: resultText(op.Result), ErrorText: clip(op.Error, maxShownResult)}
		var res struct {
			ExitCode *int `json:"exit_code"`
		}
		if len(op.Result) > 0 && json.Unmarshal(op.Result, &res) == nil {
			out[i].ExitCode = res.ExitCode
		}
	}
	return out
}

// serverData is a server's page.
type serverData struct {
	Server     orchestrator.Server
	ClientName string
	Events     []runtime.Event
	Operations []operationView
	Logs       Clipped
	LogsError  string
	// Files is the listed directory; FilesError why it could not be.
	Files      *wire.ListResult
	FilesError string
	// Dir is the directory shown ("." for the workspace).
	Dir string
	// File is the file shown, if one was asked for.
	File    *fileView
	Command *commandView
	Notice  string
}

// fileView is a file read for the page.
type fileView struct {
	Path    string
	Content Clipped
	Error   string
	Binary  bool
	// More: the file has lines past those shown.
	More       bool
	TotalLines int64
}

// commandView is a command run from the page and what it printed.
type commandView struct {
	Command              string
	Error                string
	Result               *wire.BashResult
	Stdout, Stderr       Clipped
	StdoutTruncatedBytes int64
	StderrTruncatedBytes int64
}

// operationsData is the operations page.
type operationsData struct {
	Operations []operationView
	Filter     orchestrator.OperationFilter
	Statuses   []string
	Types      []string
	Servers    []orchestrator.Server
	// Next is the URL of the next page; "" on the last.
	Next string
}
