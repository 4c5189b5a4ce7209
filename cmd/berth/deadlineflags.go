package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/orchestrator"
)

// agentDeadlines are the flags of the deadlines of berth's calls to a
// sandbox's agent and of its health checks (orchestrator.Config).
type agentDeadlines struct {
	call, commandMargin, mcp, idle time.Duration
	healthCheck, unhealthyAfter    time.Duration
}

func (d *agentDeadlines) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.DurationVar(&d.call, "agent-call-timeout", orchestrator.DefaultAgentCallTimeout,
		"deadline of a file call to a sandbox's agent (list, read, write, edit, patch); a call past it answers 504 gateway_timeout")
	fl.DurationVar(&d.commandMargin, "agent-command-margin", orchestrator.DefaultAgentCommandMargin,
		"added to a command's own timeout (and grace period) to make the deadline of the call that runs it")
	fl.DurationVar(&d.mcp, "agent-mcp-timeout", orchestrator.DefaultAgentMCPTimeout,
		"deadline of a call to a server's MCP endpoint (list_server_mcp_tools, call_server_mcp_tool)")
	fl.DurationVar(&d.idle, "agent-idle-timeout", orchestrator.DefaultAgentIdleTimeout,
		"a stream to an agent (the streamed and WebSocket forward, forward_request, archives) that moves no byte for this long ends with 504 gateway_timeout")
	fl.DurationVar(&d.healthCheck, "health-check-timeout", orchestrator.DefaultHealthCheckTimeout,
		"deadline of one health check of an agent; every running server's agent is checked each watcher round")
	fl.DurationVar(&d.unhealthyAfter, "unhealthy-after", orchestrator.DefaultUnhealthyAfter,
		"a server whose agent fails its health checks for this long is FAILED, and restarted under restart_policy on_failure")
}
