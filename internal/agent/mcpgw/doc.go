// Package mcpgw owns berth-agent's MCP endpoint (mounted at /mcp): the
// built-in file and bash tools, and a gateway that re-exposes the tools of
// MCP servers running inside the sandbox ("upstreams") under
// "<upstream>_<tool>" names, reconnecting to upstreams that go away.
package mcpgw
