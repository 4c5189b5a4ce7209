package orchestrator

import (
	"encoding/json"
	"time"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// The API types: what callers of the service see of servers and
// operations. They are separate from the store's rows so that a column
// added, renamed or kept secret changes REST, MCP and the OpenAPI
// document only when these types change, and they are converted from
// rows here and nowhere else.

// Client is a namespaced unit of work that owns servers (IdeGYM's
// client).
type Client struct {
	ID              string    `json:"id" jsonschema:"the client id"`
	Name            string    `json:"name" jsonschema:"the name it was registered with"`
	Namespace       string    `json:"namespace" jsonschema:"its namespace"`
	NodesCount      int       `json:"nodes_count" jsonschema:"nodes asked to be pre-provisioned"`
	Status          string    `json:"status" jsonschema:"ALIVE, FINISHED or STOPPED"`
	OwnerID         string    `json:"owner_id" jsonschema:"the user who owns it"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at" jsonschema:"clients without heartbeats or activity are reaped with their servers"`
	// Notice tells about options recorded but not acted on by this
	// runtime (e.g. nodes_count on the local runtime).
	Notice string `json:"notice,omitempty" jsonschema:"options recorded but not acted on by this runtime"`
	// NodesHeld is how many nodes the runtime holds for the client now,
	// on runtimes that hold nodes (nodes_count).
	NodesHeld *int `json:"nodes_held,omitempty" jsonschema:"nodes the runtime holds for it now (Kubernetes)"`
}

func clientView(c store.Client) Client {
	return Client{
		ID: c.ID, Name: c.Name, Namespace: c.Namespace, NodesCount: c.NodesCount, Status: c.Status,
		OwnerID: c.OwnerID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, LastHeartbeatAt: c.LastHeartbeatAt,
	}
}

func withClientView(c store.Client, err error) (Client, error) {
	if err != nil {
		return Client{}, err
	}
	return clientView(c), nil
}

// Resources are a sandbox's CPU and memory requests, in Kubernetes
// notation.
type Resources struct {
	CPU    string `json:"cpu,omitempty" jsonschema:"CPU, e.g. 500m or 2"`
	Memory string `json:"memory,omitempty" jsonschema:"memory, e.g. 512Mi or 2Gi"`
}

// Server is one sandbox.
type Server struct {
	ID               string     `json:"id" jsonschema:"the server id"`
	ClientID         string     `json:"client_id" jsonschema:"the client that owns it"`
	OwnerID          string     `json:"owner_id" jsonschema:"the user who owns it"`
	Namespace        string     `json:"namespace" jsonschema:"its client's namespace"`
	ServerName       string     `json:"server_name" jsonschema:"the name it was started with"`
	ImageTag         string     `json:"image_tag" jsonschema:"the image it runs, as the runtime names it (an image reference normalized: docker.io/library/python:3.12)"`
	RuntimeClassName string     `json:"runtime_class_name" jsonschema:"its Kubernetes runtime class, if any"`
	Resources        Resources  `json:"resources" jsonschema:"the resources it asked for"`
	EnvKeys          []string   `json:"env_keys" jsonschema:"names of its environment variables (values are never shown)"`
	Status           string     `json:"status" jsonschema:"STARTING, RUNNING, FINISHED, STOPPING, STOPPED or FAILED"`
	Warm             bool       `json:"warm,omitempty" jsonschema:"waiting in the warm pool, owned by nobody yet"`
	Error            string     `json:"error,omitempty" jsonschema:"why it failed"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	LastActivityAt   time.Time  `json:"last_activity_at" jsonschema:"the last command, file call or forwarded request; idle servers are reaped after a while"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
	RestartPolicy    string     `json:"restart_policy" jsonschema:"never or on_failure"`
	Restarts         int        `json:"restarts" jsonschema:"how many times berth recreated its sandbox in a row (on_failure)"`
	MCPUpstreams     []string   `json:"mcp_upstreams" jsonschema:"names of the in-sandbox MCP servers declared at start (their tools are listed as <name>_<tool>)"`
	// The health of its agent, while it runs: berth checks it every few
	// seconds.
	Unhealthy      bool       `json:"unhealthy,omitempty" jsonschema:"its agent fails its health checks: calls to it may time out, and if this goes on it is FAILED (or restarted, under restart_policy on_failure)"`
	UnhealthySince *time.Time `json:"unhealthy_since,omitempty" jsonschema:"when its agent began to fail its health checks"`
	HealthError    string     `json:"health_error,omitempty" jsonschema:"what the last failed health check found"`
	// Network is absent on a runtime that enforces no policies.
	Network *egress.Policy `json:"network,omitempty" jsonschema:"what its sandbox may reach (set_server_network changes it)"`
}

func serverView(s store.Server) Server {
	// A mark left from before a stop or restart says nothing now.
	live := s.Status == ServerRunning || s.Status == ServerFinished
	v := Server{
		ID: s.ID, ClientID: s.ClientID, OwnerID: s.OwnerID, Namespace: s.Namespace,
		ServerName: s.ServerName, ImageTag: s.ImageTag, RuntimeClassName: s.RuntimeClassName,
		Resources: Resources(s.Resources), EnvKeys: s.EnvKeys, Status: s.Status, Warm: s.Warm,
		Error: s.Error, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, LastActivityAt: s.LastActivityAt,
		FinishedAt: s.FinishedAt, RestartPolicy: s.RestartPolicy, Restarts: s.Restarts, MCPUpstreams: s.UpstreamNames,
		Unhealthy: s.UnhealthySince != nil && live,
	}
	if v.Unhealthy {
		v.UnhealthySince, v.HealthError = s.UnhealthySince, s.HealthError
	}
	if s.Network.Egress != "" {
		n := s.Network
		v.Network = &n
	}
	return v
}

// Operation is an asynchronous call's record, in berth's form: Result is
// the finished call's answer as a JSON object (for a bash command the
// command's result itself). IdeGYM's tools answer IdeGYMOperation
// instead, whose result is the same answer as a JSON string.
type Operation struct {
	ID        string          `json:"id" jsonschema:"the operation id"`
	Type      string          `json:"type" jsonschema:"what it does: start_server, restart_server, run_bash_command, ..."`
	Status    string          `json:"status" jsonschema:"SCHEDULED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED"`
	ServerID  string          `json:"server_id,omitempty" jsonschema:"the server it acts on"`
	Result    json.RawMessage `json:"result,omitempty" jsonschema:"the answer once it SUCCEEDED: a JSON object (for a bash command: stdout, stderr, exit_code, ...)"`
	Error     string          `json:"error,omitempty" jsonschema:"why it FAILED"`
	ErrorCode string          `json:"error_code,omitempty" jsonschema:"the error's code (bad_request, not_found, bad_gateway, ...)"`
	// Progress is how far a running operation is, when it can say.
	Progress  *runtime.Progress `json:"progress,omitempty" jsonschema:"how far a running operation is, when it says: a start pulling its image (step, bytes_done, bytes_total, layers_done, layers_total)"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`

	// TaskTTLMs is the ttl granted the operation as an MCP task, nil when
	// it is none.
	TaskTTLMs *int64 `json:"-"`

	// stored is the result as the operation recorded it, IdeGYM's form.
	stored *string
}

// IdeGYMOperation is an operation as IdeGYM's tools answer it: the id
// also under IdeGYM's name for it, and the result as a JSON string that
// clients decode (`json.loads(status["result"])`); a bash command's is
// the agent's forwarded response, with the command's result in its body.
type IdeGYMOperation struct {
	OperationID      string  `json:"operation_id,omitempty" jsonschema:"the operation id (start_server, restart_server, get_operation_status)"`
	AsyncOperationID string  `json:"async_operation_id,omitempty" jsonschema:"the operation id (run_bash_command)"`
	ID               string  `json:"id" jsonschema:"the operation id"`
	Type             string  `json:"type" jsonschema:"what it does"`
	Status           string  `json:"status" jsonschema:"SCHEDULED, IN_PROGRESS, SUCCEEDED, FAILED or CANCELLED"`
	ServerID         string  `json:"server_id,omitempty" jsonschema:"the server it acts on"`
	Result           *string `json:"result" jsonschema:"the answer once it SUCCEEDED, as a JSON string; null before"`
	Error            string  `json:"error,omitempty" jsonschema:"why it FAILED"`
	ErrorCode        string  `json:"error_code,omitempty" jsonschema:"the error's code"`
	// Progress is berth's: how far a running operation is.
	Progress  *runtime.Progress `json:"progress,omitempty" jsonschema:"how far a running operation is, when it says: a start pulling its image (step, bytes_done, bytes_total, layers_done, layers_total)"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// IdeGYM returns the operation in IdeGYM's form, its id also under
// idName (operation_id or async_operation_id).
func (o Operation) IdeGYM(idName string) IdeGYMOperation {
	out := IdeGYMOperation{
		ID: o.ID, Type: o.Type, Status: o.Status, ServerID: o.ServerID, Result: o.stored,
		Error: o.Error, ErrorCode: o.ErrorCode, Progress: o.Progress,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}
	if idName == "async_operation_id" {
		out.AsyncOperationID = o.ID
	} else {
		out.OperationID = o.ID
	}
	return out
}

func operationView(op store.Operation) Operation {
	out := Operation{
		ID: op.ID, Type: op.Type, Status: op.Status, ServerID: op.ServerID, Result: resultObject(op),
		Error: op.Error, ErrorCode: op.ErrorCode, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
		TaskTTLMs: op.TaskTTLMs, stored: op.Result,
	}
	var p runtime.Progress
	if op.Progress != nil && json.Unmarshal(op.Progress, &p) == nil && p.Step != "" {
		out.Progress = &p
	}
	return out
}

func operationViews(rows []store.Operation) []Operation {
	out := make([]Operation, len(rows))
	for i, r := range rows {
		out[i] = operationView(r)
	}
	return out
}

// resultObject is an operation's stored result as a JSON object: for a
// bash command the body of the forwarded response (the command's result),
// for every other operation the stored JSON itself. A result that is not
// an object (an older row, say) is kept as {"value": ...} rather than
// lost, so the field is an object for every client that validates it.
func resultObject(op store.Operation) json.RawMessage {
	if op.Result == nil {
		return nil
	}
	raw := []byte(*op.Result)
	if op.Type == opRunBash {
		var fr ForwardedResponse
		if json.Unmarshal(raw, &fr) == nil {
			raw = []byte(fr.Body)
		}
	}
	if isObject(raw) {
		return raw
	}
	var v any = *op.Result
	if json.Valid(raw) {
		v = json.RawMessage(raw)
	}
	b, _ := json.Marshal(map[string]any{"value": v})
	return b
}

func isObject(b []byte) bool {
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// withOperationView and withServerView convert a store call's answer
// where a public method returns it directly.
func withOperationView(op store.Operation, err error) (Operation, error) {
	if err != nil {
		return Operation{}, err
	}
	return operationView(op), nil
}

func withServerView(srv store.Server, err error) (Server, error) {
	if err != nil {
		return Server{}, err
	}
	return serverView(srv), nil
}
