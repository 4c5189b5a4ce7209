package mcpserver

import (
	"context"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
)

// clientRef names a client (IdeGYM passes the namespace too).
type clientRef struct {
	ClientID  string `json:"client_id" jsonschema:"the client"`
	Namespace string `json:"namespace,omitempty" jsonschema:"ignored; accepted for IdeGYM compatibility"`
}

type restartRequest struct {
	orchestrator.ServerRef
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) and return the finished operation inline"`
}

type operationRequest struct {
	OperationID string  `json:"operation_id" jsonschema:"the operation"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (max 300) for it to finish"`
}

// operationResult is an operation with IdeGYM's name for its id, as
// start_server, restart_server and get_operation_status return it.
type operationResult struct {
	OperationID string `json:"operation_id"`
	orchestrator.Operation
}

// bashOperationResult is run_bash_command's answer: IdeGYM calls the id
// async_operation_id there.
type bashOperationResult struct {
	AsyncOperationID string `json:"async_operation_id"`
	orchestrator.Operation
}

func withID(op orchestrator.Operation, err error) (operationResult, error) {
	return operationResult{OperationID: op.ID, Operation: op}, err
}

func (s *Server) addIdeGYMTools() {
	svc := s.svc
	add(s, toolSpec{name: "register_client", title: "Register client", action: rbac.ActionClientCreate,
		description: "Create a client: a namespaced unit of work that owns servers. Returns the client; use its id in start_server."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.RegisterClientRequest]) (orchestrator.Client, error) {
			return svc.RegisterClient(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "stop_client", title: "Stop client", action: rbac.ActionClientDelete, destructive: true, idempotent: true,
		description: "Stop a client and delete all its servers and their files."},
		func(ctx context.Context, p rbac.Principal, in request[clientRef]) (orchestrator.Client, error) {
			return svc.StopClient(ctx, p, in.Request.ClientID)
		})
	add(s, toolSpec{name: "finish_client", title: "Finish client", action: rbac.ActionClientUpdate, idempotent: true,
		description: "Mark a client and its running servers reusable without deleting anything; a later start_server with reuse_strategy RESET or RESTART can take them."},
		func(ctx context.Context, p rbac.Principal, in request[clientRef]) (orchestrator.Client, error) {
			return svc.FinishClient(ctx, p, in.Request.ClientID)
		})
	add(s, toolSpec{name: "start_server", title: "Start server", action: rbac.ActionServerCreate,
		description: "Start a sandbox server for a client, or reuse a finished one (reuse_strategy RESET keeps its files, RESTART gives a fresh filesystem). Returns an operation; its result (a JSON string) holds server_id. Pass wait_seconds to get the finished operation inline."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.StartServerRequest]) (operationResult, error) {
			return withID(svc.StartServer(ctx, p, in.Request))
		})
	add(s, toolSpec{name: "stop_server", title: "Stop server", action: rbac.ActionServerDelete, destructive: true, idempotent: true,
		description: "Stop a server and delete its sandbox and files."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.ServerRef]) (orchestrator.Server, error) {
			return svc.StopServer(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "finish_server", title: "Finish server", action: rbac.ActionServerUpdate, idempotent: true,
		description: "Mark a running server reusable without deleting it."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.ServerRef]) (orchestrator.Server, error) {
			return svc.FinishServer(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "restart_server", title: "Restart server", action: rbac.ActionServerUpdate, destructive: true,
		description: "Restart a server with a fresh filesystem and wait for it to be ready. Returns an operation."},
		func(ctx context.Context, p rbac.Principal, in request[restartRequest]) (operationResult, error) {
			return withID(svc.RestartServer(ctx, p, in.Request.ServerRef, in.Request.WaitSeconds))
		})
	add(s, toolSpec{name: "build_images_from_yaml", title: "Build images", action: rbac.ActionImageBuild,
		description: "Build images from image-builder YAML (yaml_content): images: [{name, base, commands, env, files, runtime_class_name, resources, timeout_seconds}]. Each image becomes a build job: files are written into a fresh sandbox started from base, the commands run in order, and the result is kept as the image name (on the local runtime a workspace template, so start_server with image_tag name starts from it). Returns job_names; ask get_job_status about each. Needs a global admin; wait_seconds waits for the builds."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.BuildImagesRequest]) (orchestrator.BuildImagesResult, error) {
			return svc.BuildImages(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "get_operation_status", title: "Get operation status", action: rbac.ActionOperationRead, readOnly: true, idempotent: true,
		description: "Read an operation's status (SCHEDULED, IN_PROGRESS, SUCCEEDED, FAILED, CANCELLED) and, when it succeeded, its result as a JSON string. wait_seconds waits for it to finish."},
		func(ctx context.Context, p rbac.Principal, in request[operationRequest]) (operationResult, error) {
			return withID(svc.GetOperation(ctx, p, in.Request.OperationID, in.Request.WaitSeconds))
		})
	add(s, toolSpec{name: "get_job_status", title: "Get build job status", action: rbac.ActionOperationRead, readOnly: true, idempotent: true,
		description: "Read an image build job: status (in_progress, success, failure), tag (the image_tag to start servers from, once built), details (the current step, or why it failed: the command, its exit status and the end of its output) and log_tail. wait_seconds waits for it to finish."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.JobStatusRequest]) (orchestrator.BuildJob, error) {
			return svc.GetJobStatus(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "forward_request", title: "Forward request", action: rbac.ActionServerExec,
		description: "Send one HTTP request to a running server's agent (path without a leading slash, e.g. api/fs/ls?path=.) and return its status_code, headers and body."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.ForwardRequest]) (orchestrator.ForwardedResponse, error) {
			return svc.ForwardRequest(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "run_bash_command", title: "Run bash command", action: rbac.ActionServerExec,
		description: "Run a one-shot bash script on a server. Returns an operation (async_operation_id); when it succeeds its result is the forwarded response, whose body is the JSON {stdout, stderr, exit_code, timed_out, ...}. Output is capped at max_output_bytes per stream, keeping head and tail. Pass wait_seconds to get it inline."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.RunBashRequest]) (bashOperationResult, error) {
			op, err := svc.RunBashCommand(ctx, p, in.Request)
			return bashOperationResult{AsyncOperationID: op.ID, Operation: op}, err
		})
	add(s, toolSpec{name: "list_server_mcp_tools", title: "List server MCP tools", action: rbac.ActionServerExec, readOnly: true, idempotent: true,
		description: "List the MCP tools a running server exposes: its built-in file tools and every in-sandbox MCP server it proxies (named <upstream>_<tool>)."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.ServerToolsRequest]) (orchestrator.ServerTools, error) {
			return svc.ListServerTools(ctx, p, in.Request)
		})
	add(s, toolSpec{name: "call_server_mcp_tool", title: "Call server MCP tool", action: rbac.ActionServerExec,
		description: "Call one of a running server's MCP tools. Returns its content items and is_error."},
		func(ctx context.Context, p rbac.Principal, in request[orchestrator.CallServerToolRequest]) (orchestrator.ServerToolResult, error) {
			return svc.CallServerTool(ctx, p, in.Request)
		})
}
