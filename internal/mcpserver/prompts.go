package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "berth_start_sandbox",
		Title:       "Start a sandbox for a task",
		Description: "Start a berth sandbox for a task and explain how to work in it.",
		Arguments: []*mcp.PromptArgument{
			{Name: "task", Description: "what you want to do in the sandbox", Required: true},
			{Name: "image_tag", Description: "sandbox image (default: base)"},
		},
	}, s.startSandboxPrompt)
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "berth_debug_server",
		Title:       "Debug a server",
		Description: "Collect a server's status, agent logs and recent operations to find out what is wrong with it.",
		Arguments:   []*mcp.PromptArgument{{Name: "server_id", Description: "the server to debug", Required: true}},
	}, s.debugServerPrompt)
}

func (s *Server) startSandboxPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	task := strings.TrimSpace(req.Params.Arguments["task"])
	if task == "" {
		return nil, fmt.Errorf("argument task is required")
	}
	image := req.Params.Arguments["image_tag"]
	if image == "" {
		image = "base"
	}
	text := fmt.Sprintf(`Work on this task in a berth sandbox: %s

1. Call register_client with {"request": {"name": "<short task name>"}} and keep the returned id.
2. Call start_server with {"request": {"client_id": "<id>", "image_tag": %q, "wait_seconds": 120}}; the operation's result is a JSON string holding server_id.
3. Use bash with server_id and a session name for commands: cwd and variables persist between calls. A non-zero exit_code is a result to read, not a failure of the tool.
4. Use read_file, list_files, write_file, edit_file (line ranges) and patch_file (unified diffs) for files; paths are relative to the workspace.
5. When done, call finish_server to keep the sandbox for reuse, or stop_server to delete it.`, task, image)
	return &mcp.GetPromptResult{
		Description: "Start a sandbox and work in it",
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

func (s *Server) debugServerPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	id := strings.TrimSpace(req.Params.Arguments["server_id"])
	if id == "" {
		return nil, fmt.Errorf("argument server_id is required")
	}
	p := principal(ctx)
	srv, err := s.svc.GetServer(ctx, p, id)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	status, _ := json.MarshalIndent(srv, "", "  ")
	fmt.Fprintf(&b, "Find out what is wrong with berth server %s and how to fix it.\n\nStatus:\n%s\n", id, status)
	if ops, err := s.svc.ServerOperations(ctx, p, id, 10); err == nil {
		opsJSON, _ := json.MarshalIndent(ops, "", "  ")
		fmt.Fprintf(&b, "\nRecent operations (newest first):\n%s\n", opsJSON)
	} else {
		fmt.Fprintf(&b, "\nRecent operations: unavailable (%v)\n", err)
	}
	if logs, err := s.svc.ServerLogs(ctx, p, id, 100); err == nil {
		fmt.Fprintf(&b, "\nAgent log (last 100 lines):\n%s\n", logs)
	} else {
		fmt.Fprintf(&b, "\nAgent log: unavailable (%v)\n", err)
	}
	return &mcp.GetPromptResult{
		Description: "Status, operations and logs of server " + id,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: b.String()}}},
	}, nil
}
