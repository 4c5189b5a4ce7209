package orchestrator

import (
	"context"
	"time"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/wire"
)

// Deadlines of the calls to a sandbox's agent. Every call has one, derived
// here from what the call does and nowhere else: root in a sandbox can
// stop its agent or take its socket and answer nothing, and a call
// without a deadline would then hold its caller (and an exec slot, a
// worker) for as long as the caller waits. A call cut by its deadline
// fails with gateway_timeout naming the server and the call, and the
// server's idle connections are closed (see forward.Bound); an agent that
// stops answering altogether is found by the health checks (health.go).

// Deadlines by default (Config fields of the same names).
const (
	DefaultAgentCallTimeout   = 30 * time.Second
	DefaultAgentCommandMargin = 30 * time.Second
	DefaultAgentMCPTimeout    = 5 * time.Minute
	DefaultAgentIdleTimeout   = 5 * time.Minute
	DefaultHealthCheckTimeout = 5 * time.Second
	DefaultUnhealthyAfter     = time.Minute
)

// agentCall is one kind of call to an agent: what it is, which its
// timeout error names, and its deadline.
type agentCall struct {
	what    string
	timeout time.Duration
}

// fileCall is a call that touches the workspace's files or the agent's
// own state (list, read, write, create, edit, patch, reset the sessions):
// seconds' work for any agent that answers.
func (s *Service) fileCall(what string) agentCall {
	return agentCall{what: what, timeout: s.cfg.AgentCallTimeout}
}

// commandCall runs a command for up to run (its own timeout and grace
// period), plus a margin for the agent to start it and answer.
func (s *Service) commandCall(what string, run time.Duration) agentCall {
	return agentCall{what: what, timeout: run + s.cfg.AgentCommandMargin}
}

// bashCall is the call that runs a one-shot command, from the request's
// timeout and grace period (the agent's defaults when unset).
func (s *Service) bashCall(what string, req wire.BashRequest) agentCall {
	timeout, err := wire.Seconds("command_timeout", req.CommandTimeout, wire.DefaultCommandTimeoutSeconds, false)
	if err != nil {
		timeout = wire.DefaultCommandTimeoutSeconds * time.Second // checked at the call; the agent refuses it anyway
	}
	grace, err := wire.Seconds("graceful_termination_timeout", req.GracefulTerminationTimeout, wire.DefaultGracefulTerminationSeconds, true)
	if err != nil {
		grace = wire.DefaultGracefulTerminationSeconds * time.Second
	}
	return s.commandCall(what, timeout+grace)
}

// sessionCall runs a command in a persistent shell for up to its timeout,
// which the caller has set (SessionExec always sends one).
func (s *Service) sessionCall(req wire.SessionExecRequest) agentCall {
	return s.commandCall("the session command", time.Duration(req.Timeout*float64(time.Second)))
}

// mcpCall is a call to the sandbox's MCP endpoint, which the agent may
// pass on to an MCP server in the sandbox whose tools take a while.
func (s *Service) mcpCall(what string) agentCall {
	return agentCall{what: what, timeout: s.cfg.AgentMCPTimeout}
}

// healthCall is one health check.
func (s *Service) healthCall() agentCall {
	return agentCall{what: "the health check", timeout: s.cfg.HealthCheckTimeout}
}

// bound applies c's deadline to ctx for a call to serverID's agent.
func (s *Service) bound(ctx context.Context, serverID string, c agentCall) (context.Context, context.CancelFunc) {
	return forward.Bound(ctx, serverID, c.what, c.timeout)
}

// stream bounds a stream to serverID's agent (an archive, a forwarded
// request) by the idle timeout: it may last as long as it keeps moving.
func (s *Service) stream(ctx context.Context, serverID, what string) (context.Context, *forward.Idle, context.CancelFunc) {
	return forward.WithIdle(ctx, serverID, what, s.cfg.AgentIdleTimeout)
}
