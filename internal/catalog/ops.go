package catalog

import (
	"context"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/rbac"
)

// Catalog is every operation, bound to the service that implements them.
type Catalog struct {
	ops    []Op
	byName map[string]Op
}

// New returns the catalogue of svc's operations.
func New(svc *orchestrator.Service) *Catalog {
	c := &Catalog{ops: ops(svc), byName: map[string]Op{}}
	for _, o := range c.ops {
		c.byName[o.Name] = o
	}
	return c
}

// Ops lists the operations in the order they are documented.
func (c *Catalog) Ops() []Op { return c.ops }

// Op returns the operation named name.
func (c *Catalog) Op(name string) (Op, bool) {
	o, ok := c.byName[name]
	return o, ok
}

// Hint sets for the common kinds of operation.
var (
	reads       = Hints{ReadOnly: true, Idempotent: true}
	idempotent  = Hints{Idempotent: true}
	destroys    = Hints{Destructive: true, Idempotent: true}
	changesOnce = Hints{Destructive: true}
)

func ops(svc *orchestrator.Service) []Op {
	return []Op{
		define(Op{Name: "whoami", Title: "Who am I", Action: rbac.ActionClientRead, Hints: reads,
			Summary:     "The caller: user, roles, scopes, namespaces",
			Description: "Your user, roles (and where they apply), token scopes and namespaces.",
			REST:        Route{Method: "GET", Path: "/api/whoami"}},
			func(ctx context.Context, p rbac.Principal, _ Empty) (orchestrator.Whoami, error) {
				return svc.Whoami(ctx, p)
			}),

		// Clients.
		define(Op{Name: "register_client", IdeGYM: "register_client", Title: "Register client", Action: rbac.ActionClientCreate,
			Summary:     "Register a client",
			Description: "Create a client: a namespaced unit of work that owns servers. Returns the client; use its id in start_server.",
			REST:        Route{Method: "POST", Path: "/api/clients"}},
			svc.RegisterClient),
		define(Op{Name: "list_clients", Title: "List clients", Action: rbac.ActionClientRead, Hints: reads,
			Summary:     "List the caller's clients",
			Description: "List your clients.",
			REST:        Route{Method: "GET", Path: "/api/clients"}},
			func(ctx context.Context, p rbac.Principal, _ Empty) (ClientList, error) {
				cs, err := svc.ListClients(ctx, p)
				return ClientList{Clients: cs}, err
			}),
		define(Op{Name: "get_client", Title: "Get client", Action: rbac.ActionClientRead, Hints: reads,
			Summary: "Get a client",
			REST:    Route{Method: "GET", Path: "/api/clients/{client_id}"}},
			func(ctx context.Context, p rbac.Principal, in ClientInput) (orchestrator.Client, error) {
				return svc.GetClient(ctx, p, in.ClientID)
			}),
		define(Op{Name: "heartbeat_client", Title: "Heartbeat client", Action: rbac.ActionClientUpdate, Hints: idempotent,
			Summary: "Keep a client and its servers from being reaped",
			REST:    Route{Method: "POST", Path: "/api/clients/{client_id}/heartbeat"}},
			func(ctx context.Context, p rbac.Principal, in ClientInput) (orchestrator.Client, error) {
				return svc.HeartbeatClient(ctx, p, in.ClientID)
			}),
		define(Op{Name: "finish_client", IdeGYM: "finish_client", Title: "Finish client", Action: rbac.ActionClientUpdate, Hints: idempotent,
			Summary:     "Mark a client and its servers reusable",
			Description: "Mark a client and its running servers reusable without deleting anything; a later start_server with reuse_strategy RESET or RESTART can take them.",
			REST:        Route{Method: "POST", Path: "/api/clients/{client_id}/finish"}},
			func(ctx context.Context, p rbac.Principal, in ClientRef) (orchestrator.Client, error) {
				return svc.FinishClient(ctx, p, in.ClientID)
			}),
		define(Op{Name: "stop_client", IdeGYM: "stop_client", Title: "Stop client", Action: rbac.ActionClientDelete, Hints: destroys,
			Summary:     "Stop a client and delete its servers",
			Description: "Stop a client and delete all its servers and their files.",
			REST:        Route{Method: "DELETE", Path: "/api/clients/{client_id}"}},
			func(ctx context.Context, p rbac.Principal, in ClientRef) (orchestrator.Client, error) {
				return svc.StopClient(ctx, p, in.ClientID)
			}),

		// Servers.
		define(Op{Name: "start_server", IdeGYM: "start_server", Title: "Start server", Action: rbac.ActionServerCreate, LongRunning: true, Task: true,
			Summary:     "Start a server (returns an operation; wait_seconds waits for it)",
			Description: "Start a sandbox server for a client, or reuse a finished one (reuse_strategy RESET keeps its files, RESTART gives a fresh filesystem). Returns an operation; its result (a JSON string) holds server_id. Pass wait_seconds to get the finished operation inline.",
			REST:        Route{Method: "POST", Path: "/api/servers"}},
			svc.StartServer),
		define(Op{Name: "list_servers", Title: "List servers", Action: rbac.ActionServerRead, Hints: reads,
			Summary:     "List the caller's servers",
			Description: "List your servers, optionally of one client.",
			REST:        Route{Method: "GET", Path: "/api/servers", Query: []string{"client_id"}}},
			func(ctx context.Context, p rbac.Principal, in ListServersInput) (ServerList, error) {
				ss, err := svc.ListServers(ctx, p, in.ClientID)
				return ServerList{Servers: ss}, err
			}),
		define(Op{Name: "get_server", Title: "Get server", Action: rbac.ActionServerRead, Hints: reads,
			Summary:     "Get a server (with its sandbox's recent events on Kubernetes)",
			Description: "Get a server's status, image, names of its env variables, timestamps and, on Kubernetes, its pod's recent events.",
			REST:        Route{Method: "GET", Path: "/api/servers/{server_id}"}},
			func(ctx context.Context, p rbac.Principal, in ServerInput) (orchestrator.ServerDetail, error) {
				return svc.GetServer(ctx, p, in.ServerID)
			}),
		define(Op{Name: "finish_server", IdeGYM: "finish_server", Title: "Finish server", Action: rbac.ActionServerUpdate, Hints: idempotent,
			Summary:     "Mark a server reusable without deleting it",
			Description: "Mark a running server reusable without deleting it.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/finish"}},
			svc.FinishServer),
		define(Op{Name: "restart_server", IdeGYM: "restart_server", Title: "Restart server", Action: rbac.ActionServerUpdate, Hints: changesOnce, LongRunning: true, Task: true,
			Summary:     "Restart a server with a fresh filesystem (returns an operation)",
			Description: "Restart a server with a fresh filesystem and wait for it to be ready. Returns an operation.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/restart"}},
			func(ctx context.Context, p rbac.Principal, in RestartInput) (orchestrator.Operation, error) {
				return svc.RestartServer(ctx, p, in.ServerRef, in.WaitSeconds)
			}),
		define(Op{Name: "stop_server", IdeGYM: "stop_server", Title: "Stop server", Action: rbac.ActionServerDelete, Hints: destroys,
			Summary:     "Stop a server and delete its sandbox",
			Description: "Stop a server and delete its sandbox and files.",
			REST:        Route{Method: "DELETE", Path: "/api/servers/{server_id}"}},
			svc.StopServer),
		define(Op{Name: "set_server_network", Title: "Set server network", Action: rbac.ActionServerUpdate, Hints: idempotent,
			Summary:     "Change what a server's sandbox may reach on the network",
			Description: "Change a running server's network policy (egress none, allowlist with allow entries, or public), within what the operator allows. Its sandbox's next connection is decided by the new policy; open connections stay. Audited; get_server shows the policy and the last refused connections.",
			REST:        Route{Method: "PUT", Path: "/api/servers/{server_id}/network"}},
			svc.SetServerNetwork),
		define(Op{Name: "get_server_logs", Title: "Get server logs", Action: rbac.ActionServerRead, Hints: reads,
			Summary:     "The last lines of the server's agent log",
			Description: "The last lines of a server's agent log.",
			REST:        Route{Method: "GET", Path: "/api/servers/{server_id}/logs", Query: []string{"tail"}}},
			func(ctx context.Context, p rbac.Principal, in LogsInput) (ServerLogs, error) {
				logs, err := svc.ServerLogs(ctx, p, in.ServerID, in.Tail)
				return ServerLogs{ServerID: in.ServerID, Logs: logs}, err
			}),
		define(Op{Name: "list_server_operations", Title: "List server operations", Action: rbac.ActionServerRead, Hints: reads,
			Summary: "The server's latest operations, newest first",
			REST:    Route{Method: "GET", Path: "/api/servers/{server_id}/operations", Query: []string{"limit"}}},
			func(ctx context.Context, p rbac.Principal, in OperationsInput) (OperationList, error) {
				ops, err := svc.ServerOperations(ctx, p, in.ServerID, in.Limit)
				return OperationList{Operations: ops}, err
			}),

		// Commands.
		define(Op{Name: "bash", Title: "Bash", Action: rbac.ActionServerExec, Also: startsSession(withoutServer),
			Summary:     "Run a command in a persistent shell session",
			Description: "Run a command in a persistent bash shell. Returns stdout, stderr, exit_code and duration_ms; a non-zero exit code is a normal result. cwd, exported variables and functions persist across calls in the same session. With server_id it runs on that server; without, in your sandbox for the session (the session argument or the X-Session-ID header), which berth starts on the first call (taking a few seconds) and reuses after, with its /workspace; end_session ends it, and idle ones are reaped. For commands longer than a few minutes use run_bash_command with wait_seconds.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/sessions/{session}/exec"}},
			func(ctx context.Context, p rbac.Principal, in SessionExecInput) (orchestrator.SessionBashResult, error) {
				session := in.Session
				if in.ServerID == "" {
					session = sessionOr(ctx, session)
				}
				return svc.Bash(ctx, p, in.ServerID, orchestrator.SessionBashRequest{Session: session, SessionExecRequest: in.SessionExecRequest, Network: in.Network})
			}),
		define(Op{Name: "session_exec", Title: "Session exec", Action: rbac.ActionServerExec, Also: startsSession(nil), NoMCP: true,
			Summary: "Run a command in your sandbox for a session, started on the first call (MCP: bash without server_id)",
			REST:    Route{Method: "POST", Path: "/api/sessions/{session}/exec"}},
			svc.SessionBash),
		define(Op{Name: "end_session", Title: "End session", Action: rbac.ActionClientDelete, Hints: destroys,
			Summary:     "End a session: stop its sandbox and delete its files",
			Description: "End a bash session started without server_id (the session argument or the X-Session-ID header): its sandbox is stopped and its files deleted; the next bash call for it starts afresh.",
			REST:        Route{Method: "DELETE", Path: "/api/sessions/{session}"}},
			func(ctx context.Context, p rbac.Principal, in SessionInput) (orchestrator.EndSessionResult, error) {
				return svc.EndSession(ctx, p, sessionOr(ctx, in.Session))
			}),
		define(Op{Name: "run_bash_command", IdeGYM: "run_bash_command", IdeGYMID: "async_operation_id", Title: "Run bash command", Action: rbac.ActionServerExec, LongRunning: true, Task: true,
			Summary:     "Run a one-shot bash command (returns an operation; wait_seconds waits for it)",
			Description: "Run a one-shot bash script on a server. Returns an operation (async_operation_id); when it succeeds its result is the forwarded response, whose body is the JSON {stdout, stderr, exit_code, timed_out, ...}. Output is capped at max_output_bytes per stream, keeping head and tail. Pass wait_seconds to get it inline.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/bash"}},
			svc.RunBashCommand),
		define(Op{Name: "get_operation_status", IdeGYM: "get_operation_status", Title: "Get operation status", Action: rbac.ActionOperationRead, Hints: reads,
			Summary:     "Get an operation; wait_seconds waits for it to finish",
			Description: "Read an operation's status (SCHEDULED, IN_PROGRESS, SUCCEEDED, FAILED, CANCELLED) and, when it succeeded, its result as a JSON string. wait_seconds waits for it to finish.",
			REST:        Route{Method: "GET", Path: "/api/operations/{operation_id}", Query: []string{"wait_seconds"}}},
			func(ctx context.Context, p rbac.Principal, in OperationInput) (orchestrator.Operation, error) {
				return svc.GetOperation(ctx, p, in.OperationID, in.WaitSeconds)
			}),

		define(Op{Name: "run_tests", Title: "Run tests", Action: rbac.ActionServerExec, LongRunning: true, Task: true,
			Summary:     "Run a test command and count its JUnit results (returns an operation; wait_seconds waits for it)",
			Description: "Run the tests in a server's workspace (command, e.g. pytest --junitxml=report.xml) and count the JUnit XML reports it writes (junit_paths). Returns an operation; when it succeeds its result holds total, passed, failed, skipped and errors, the reports counted, the exit code and the ends of the logs. Pass wait_seconds to get it inline.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/tests"}},
			svc.RunTests),

		// Cancelling counts as what started the work: a change (write) for
		// starts, restarts, stops and builds, a command (exec) for the
		// rest. Which one a call needs depends on the operation, so both
		// are asked for.
		define(Op{Name: "cancel_operation", Title: "Cancel operation", Action: rbac.ActionServerUpdate, Also: []Also{{Action: rbac.ActionServerExec}}, Hints: Hints{Destructive: true},
			Summary:     "Cancel an operation that has not finished (its command is stopped)",
			Description: "Cancel an operation that has not finished: it becomes CANCELLED and the work stops (a command is killed, a start is undone). A finished operation cannot be cancelled.",
			REST:        Route{Method: "POST", Path: "/api/operations/{operation_id}/cancel"}},
			func(ctx context.Context, p rbac.Principal, in OperationRef) (orchestrator.Operation, error) {
				return svc.CancelOperation(ctx, p, in.OperationID)
			}),
		define(Op{Name: "list_operations", Title: "List operations", Action: rbac.ActionOperationRead, Hints: reads,
			Summary:     "Your operations, newest first, paged",
			Description: "Your operations, newest first, paged (pass next_cursor as cursor, with the same filters, for the next page); filter by status, type and server_id.",
			REST:        Route{Method: "GET", Path: "/api/operations", Query: []string{"status", "type", "server_id", "cursor", "limit"}}},
			func(ctx context.Context, p rbac.Principal, in OperationsPageInput) (orchestrator.OperationPage, error) {
				return svc.MyOperations(ctx, p, in.OperationFilter, in.Cursor, in.Limit)
			}),

		// Files.
		define(Op{Name: "list_files", Title: "List files", Action: rbac.ActionServerExec, Hints: reads,
			Summary:     "List a directory of the server's workspace",
			Description: "List a directory of a server's workspace (recursive lists subdirectories depth first).",
			REST:        Route{Method: "GET", Path: "/api/servers/{server_id}/files", Query: []string{"path", "recursive"}}},
			svc.ListFiles),
		define(Op{Name: "read_file", Title: "Read file", Action: rbac.ActionServerExec, Hints: reads,
			Summary:     "Read lines of a file in the server's workspace",
			Description: "Read lines of a file in a server's workspace (offset is the first line, 1-indexed; limit the number of lines). Reports total_lines and eof.",
			REST:        Route{Method: "GET", Path: "/api/servers/{server_id}/files/content", Query: []string{"path", "offset", "limit"}}},
			svc.ReadFile),
		define(Op{Name: "write_file", Title: "Write file", Action: rbac.ActionServerExec, Hints: destroys,
			Summary:     "Write a whole file atomically",
			Description: "Write a whole file in a server's workspace, atomically, replacing what was there.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/files/write"}},
			svc.WriteFile),
		define(Op{Name: "create_file", Title: "Create file", Action: rbac.ActionServerExec, Hints: changesOnce,
			Summary:     "Create a file (refuses to overwrite unless overwrite is true)",
			Description: "Create a file in a server's workspace; an existing file is an error unless overwrite is true.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/files/create"}},
			svc.CreateFile),
		define(Op{Name: "edit_file", Title: "Edit file", Action: rbac.ActionServerExec, Hints: changesOnce,
			Summary:     "Replace a line range of a file",
			Description: "Replace lines start_line..end_line (1-indexed, inclusive) of a file with new_content; end_line = start_line-1 inserts before start_line.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/files/edit"}},
			svc.EditFile),
		define(Op{Name: "patch_file", Title: "Patch file", Action: rbac.ActionServerExec, Hints: changesOnce,
			Summary:     "Apply a unified diff to a file",
			Description: "Apply a unified diff to one file. If a hunk does not apply, nothing changes and the error names the hunk and why.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/files/patch"}},
			svc.PatchFile),

		define(Op{Name: "download_archive", Title: "Download archive", Action: rbac.ActionServerExec, Hints: reads,
			Summary:     "A tar of a workspace path, in base64",
			Description: "Download a directory or file of a server's workspace as a tar archive in base64 (archive_base64), up to 8 MiB unless the operator set another limit. REST streams larger ones: GET /api/servers/{server_id}/archive?path=."},
			svc.DownloadArchiveInline),
		define(Op{Name: "upload_archive", Title: "Upload archive", Action: rbac.ActionServerExec, Hints: changesOnce,
			Summary:     "Extract a tar given in base64 into a workspace directory",
			Description: "Extract a tar archive (optionally gzip-compressed) given in base64 (archive_base64) into a directory of a server's workspace, created when missing; entries that would leave the workspace are refused. REST streams larger ones: PUT /api/servers/{server_id}/archive?path=."},
			svc.UploadArchiveInline),

		// What runs inside a server.
		define(Op{Name: "list_server_mcp_tools", IdeGYM: "list_server_mcp_tools", Title: "List server MCP tools", Action: rbac.ActionServerExec, Hints: reads,
			Summary:     "List the server's MCP tools (built-in and proxied upstreams)",
			Description: "List the MCP tools a running server exposes: its built-in file tools and every in-sandbox MCP server it proxies (named <upstream>_<tool>).",
			REST:        Route{Method: "GET", Path: "/api/servers/{server_id}/mcp/tools"}},
			svc.ListServerTools),
		define(Op{Name: "call_server_mcp_tool", IdeGYM: "call_server_mcp_tool", Title: "Call server MCP tool", Action: rbac.ActionServerExec,
			Summary:     "Call one of the server's MCP tools",
			Description: "Call one of a running server's MCP tools. Returns its content items and is_error.",
			REST:        Route{Method: "POST", Path: "/api/servers/{server_id}/mcp/call"}},
			svc.CallServerTool),
		define(Op{Name: "forward_request", IdeGYM: "forward_request", Title: "Forward request", Action: rbac.ActionServerExec,
			Summary:     "Send one HTTP request to a server's agent and get its status, headers and body as JSON",
			Description: "Send one HTTP request to a running server's agent (path without a leading slash, e.g. api/fs/ls?path=.) and return its status_code, headers and body.",
			REST:        Route{Method: "POST", Path: "/api/forward-request"}},
			svc.ForwardRequest),

		// Session tokens, self-service.
		define(Op{Name: "create_token", Title: "Create token", Action: rbac.ActionTokenManage, Hints: Hints{},
			Summary:     "Create a session token for yourself (the secret is shown once)",
			Description: "Create a session token acting as you, for an MCP client or a script: a name, scopes no wider than your own credential's, and a lifetime (expires_in seconds; the server has a default and a maximum). The answer holds the secret once; berth keeps only its hash. Send it as Authorization: Bearer <secret>.",
			REST:        Route{Method: "POST", Path: "/api/tokens"}},
			svc.CreateMyToken),
		define(Op{Name: "list_tokens", Title: "List tokens", Action: rbac.ActionTokenManage, Hints: reads,
			Also: []Also{{Action: rbac.ActionUserAdmin, Doc: "with all", When: func(_ rbac.Principal, in any) bool {
				return in.(*orchestrator.ListTokensInput).All
			}}},
			Summary:     "List your session tokens (admins: everyone's with all)",
			Description: "List your session tokens, newest first, with their scopes, state, expiry and last use; never their secrets. An admin passes all to list everyone's.",
			REST:        Route{Method: "GET", Path: "/api/tokens", Query: []string{"all"}}},
			svc.ListMyTokens),
		define(Op{Name: "revoke_token", Title: "Revoke token", Action: rbac.ActionTokenManage, Hints: destroys,
			Summary:     "Revoke a session token (yours; admins: anyone's)",
			Description: "Revoke a session token by id: it stops working at once on this replica and within seconds everywhere. Admins may revoke anyone's.",
			REST:        Route{Method: "DELETE", Path: "/api/tokens/{token_id}"}},
			svc.RevokeMyToken),

		// User administration (global admins). Off MCP: agents work in
		// sandboxes, and every tool listed costs each agent context.
		define(Op{Name: "list_users", Title: "List users", Action: rbac.ActionUserAdmin, Hints: reads, NoMCP: true,
			Summary: "Every user with their roles and live servers, and the quotas (admins)",
			REST:    Route{Method: "GET", Path: "/api/users"}},
			func(ctx context.Context, p rbac.Principal, _ Empty) (orchestrator.UserList, error) {
				return svc.ListUsers(ctx, p)
			}),
		define(Op{Name: "list_role_bindings", Title: "List role bindings", Action: rbac.ActionUserAdmin, Hints: reads, NoMCP: true,
			Summary: "Every role binding (admins)",
			REST:    Route{Method: "GET", Path: "/api/role-bindings"}},
			func(ctx context.Context, p rbac.Principal, _ Empty) (orchestrator.RoleBindingList, error) {
				return svc.ListRoleBindings(ctx, p)
			}),
		define(Op{Name: "grant_role", Title: "Grant role", Action: rbac.ActionUserAdmin, Hints: idempotent, NoMCP: true,
			Summary: "Bind a role to a user or group, in a namespace or everywhere (admins)",
			REST:    Route{Method: "POST", Path: "/api/role-bindings"}},
			svc.GrantRole),
		define(Op{Name: "revoke_role", Title: "Revoke role", Action: rbac.ActionUserAdmin, Hints: destroys, NoMCP: true,
			Summary: "Remove a role binding (admins); answers the bindings left",
			REST:    Route{Method: "DELETE", Path: "/api/role-bindings", Query: []string{"user", "group", "role", "namespace"}}},
			svc.RevokeRole),

		// The audit log.
		define(Op{Name: "read_audit_log", Title: "Read audit log", Action: rbac.ActionClientRead, Hints: reads,
			Also: []Also{{Action: rbac.ActionAuditRead, Doc: "for another user's entries", When: func(p rbac.Principal, in any) bool {
				return in.(*orchestrator.AuditQuery).NamesOthers(p)
			}}},
			Summary:     "Audit log entries, newest first (your own; an admin's filters reach everyone's)",
			Description: "Read the audit log, newest first: every call that changed something or ran a command, with who, what, on which resource and the outcome. Members read their own entries; admins read everyone's and filter by user, action, resource, namespace and time. Pass next_cursor as before for the next page.",
			REST:        Route{Method: "GET", Path: "/api/audit", Query: []string{"user", "action", "resource_type", "resource_id", "namespace", "since", "until", "before", "limit"}}},
			func(ctx context.Context, p rbac.Principal, q orchestrator.AuditQuery) (orchestrator.AuditPage, error) {
				return svc.AuditLog(ctx, p, q)
			}),

		// Images.
		define(Op{Name: "list_images", Title: "List images", Action: rbac.ActionClientRead, Hints: reads,
			Summary:     "What image_tag may name, the images this berth is set up to start, and its image cache",
			Description: "List images: what start_server's image_tag may name (an image reference, pulled at the start, or a name of the runtime's own: host, base and the images and templates it built on the local runtime), the images berth keeps ready (session image, warm pools) and whether it can start them now, and the local runtime's cache of OCI images (its size and limit; which images, by digest and reference, with the sandboxes using each, for global admins).",
			REST:        Route{Method: "GET", Path: "/api/images"}},
			func(ctx context.Context, p rbac.Principal, _ Empty) (orchestrator.ImageList, error) {
				return svc.ListImages(ctx, p)
			}),
		define(Op{Name: "build_images_from_yaml", IdeGYM: "build_images_from_yaml", Title: "Build images", Action: rbac.ActionImageBuild, LongRunning: true,
			Summary:     "Build images from image-builder YAML; one build job per image",
			Description: "Build images from image-builder YAML (yaml_content): images: [{name, base, commands, env, files, runtime_class_name, resources, timeout_seconds}]. Each image becomes a build job: files are written into a fresh sandbox started from base, the commands run in order, and the result is kept as the image name: an OCI image (on Kubernetes by Kaniko; on the local runtime the base's layers plus one of what the build changed, workspace included, pushed to the operator's registry if one is set), or on the local runtime over the host system a workspace template. get_job_status's tag is the image_tag to start it by; on the local runtime the bare name starts the latest build too. Returns job_names; ask get_job_status about each. Needs a global admin; wait_seconds waits for the builds.",
			REST:        Route{Method: "POST", Path: "/api/images/build"}},
			svc.BuildImages),
		define(Op{Name: "get_job_status", IdeGYM: "get_job_status", Title: "Get build job status", Action: rbac.ActionOperationRead, Hints: reads,
			Summary:     "Status of an image build job; wait_seconds waits for it to finish",
			Description: "Read an image build job: status (in_progress, success, failure), tag (the image_tag to start servers from, once built), details (the current step, or why it failed: the command, its exit status and the end of its output) and log_tail. wait_seconds waits for it to finish.",
			REST:        Route{Method: "GET", Path: "/api/jobs/{job_name}", Query: []string{"wait_seconds"}}},
			svc.GetJobStatus),
	}
}

// startsSession are the actions of a call that may start the caller's
// sandbox for a session (sessionActions in the orchestrator): a client
// and a server in it; when is nil for calls that always may.
func startsSession(when func(rbac.Principal, any) bool) []Also {
	doc := ""
	if when != nil {
		doc = "without server_id"
	}
	return []Also{
		{Action: rbac.ActionClientCreate, When: when, Doc: doc},
		{Action: rbac.ActionServerCreate, When: when, Doc: doc},
	}
}

// withoutServer: bash without server_id runs in the session's sandbox.
func withoutServer(_ rbac.Principal, in any) bool {
	return in.(*SessionExecInput).ServerID == ""
}
