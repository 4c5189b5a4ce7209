package mcpserver

import (
	"context"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

type bashInput struct {
	ServerID string  `json:"server_id" jsonschema:"the server to run in"`
	Command  string  `json:"command" jsonschema:"bash command line: pipes, redirects and chaining work"`
	Timeout  float64 `json:"timeout,omitempty" jsonschema:"seconds before the command is killed (default 60, max 300); the shell and its state survive a timeout"`
	Session  string  `json:"session,omitempty" jsonschema:"persistent shell to run in (default \"default\"); cwd, variables and functions persist per session"`
}

type serverInput struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
}

type logsInput struct {
	ServerID string `json:"server_id" jsonschema:"the server"`
	Tail     int    `json:"tail,omitempty" jsonschema:"number of last lines (default 200)"`
}

type logsOutput struct {
	ServerID string `json:"server_id"`
	Logs     string `json:"logs"`
}

type listServersInput struct {
	ClientID string `json:"client_id,omitempty" jsonschema:"only this client's servers"`
}

type clientList struct {
	Clients []orchestrator.Client `json:"clients"`
}

type serverList struct {
	Servers []orchestrator.Server `json:"servers"`
}

type empty struct{}

// maxBashTimeout is the bash tool's upper bound: an agent waiting longer
// on one call should use run_bash_command with wait_seconds and polling.
const maxBashTimeout = 300

func (s *Server) addBerthTools() {
	svc := s.svc
	add(s, toolSpec{name: "bash", title: "Bash", action: rbac.ActionServerExec,
		description: "Run a command in a persistent bash shell on a server. Returns stdout, stderr, exit_code and duration_ms; a non-zero exit code is a normal result. cwd, exported variables and functions persist across calls in the same session."},
		func(ctx context.Context, p rbac.Principal, in bashInput) (wire.BashResult, error) {
			if in.Timeout < 0 || in.Timeout > maxBashTimeout {
				return wire.BashResult{}, wire.Errorf(wire.CodeBadRequest, "timeout: want 0 to %d seconds, got %g", maxBashTimeout, in.Timeout)
			}
			if in.Timeout == 0 {
				in.Timeout = 60
			}
			return svc.SessionExec(ctx, p, in.ServerID, in.Session, wire.SessionExecRequest{Command: in.Command, Timeout: in.Timeout})
		})
	add(s, toolSpec{name: "read_file", title: "Read file", action: rbac.ActionServerExec, readOnly: true, idempotent: true,
		description: "Read lines of a file in a server's workspace (offset is the first line, 1-indexed; limit the number of lines). Reports total_lines and eof."},
		svc.ReadFile)
	add(s, toolSpec{name: "write_file", title: "Write file", action: rbac.ActionServerExec, destructive: true, idempotent: true,
		description: "Write a whole file in a server's workspace, atomically, replacing what was there."},
		svc.WriteFile)
	add(s, toolSpec{name: "edit_file", title: "Edit file", action: rbac.ActionServerExec, destructive: true,
		description: "Replace lines start_line..end_line (1-indexed, inclusive) of a file with new_content; end_line = start_line-1 inserts before start_line."},
		svc.EditFile)
	add(s, toolSpec{name: "patch_file", title: "Patch file", action: rbac.ActionServerExec, destructive: true,
		description: "Apply a unified diff to one file. If a hunk does not apply, nothing changes and the error names the hunk and why."},
		svc.PatchFile)
	add(s, toolSpec{name: "list_files", title: "List files", action: rbac.ActionServerExec, readOnly: true, idempotent: true,
		description: "List a directory of a server's workspace (recursive lists subdirectories depth first)."},
		svc.ListFiles)
	add(s, toolSpec{name: "list_clients", title: "List clients", action: rbac.ActionClientRead, readOnly: true, idempotent: true,
		description: "List your clients."},
		func(ctx context.Context, p rbac.Principal, _ empty) (clientList, error) {
			cs, err := svc.ListClients(ctx, p)
			return clientList{Clients: cs}, err
		})
	add(s, toolSpec{name: "list_servers", title: "List servers", action: rbac.ActionServerRead, readOnly: true, idempotent: true,
		description: "List your servers, optionally of one client."},
		func(ctx context.Context, p rbac.Principal, in listServersInput) (serverList, error) {
			ss, err := svc.ListServers(ctx, p, in.ClientID)
			return serverList{Servers: ss}, err
		})
	add(s, toolSpec{name: "get_server", title: "Get server", action: rbac.ActionServerRead, readOnly: true, idempotent: true,
		description: "Get a server's status, image, names of its env variables, timestamps and, on Kubernetes, its pod's recent events."},
		func(ctx context.Context, p rbac.Principal, in serverInput) (orchestrator.ServerDetail, error) {
			return svc.GetServer(ctx, p, in.ServerID)
		})
	add(s, toolSpec{name: "get_server_logs", title: "Get server logs", action: rbac.ActionServerRead, readOnly: true, idempotent: true,
		description: "The last lines of a server's agent log."},
		func(ctx context.Context, p rbac.Principal, in logsInput) (logsOutput, error) {
			logs, err := svc.ServerLogs(ctx, p, in.ServerID, in.Tail)
			return logsOutput{ServerID: in.ServerID, Logs: logs}, err
		})
	add(s, toolSpec{name: "whoami", title: "Who am I", action: rbac.ActionClientRead, readOnly: true, idempotent: true,
		description: "Your user, roles (and where they apply), token scopes and namespaces."},
		func(ctx context.Context, p rbac.Principal, _ empty) (orchestrator.Whoami, error) {
			return svc.Whoami(ctx, p)
		})
}
