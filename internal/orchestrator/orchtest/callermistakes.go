package orchtest

import "github.com/berth-mcp/berth/internal/wire"

// Mistake is a caller's mistake in calling a server's sandbox: the input
// of one operation, the wire code berth must answer and the words its
// message must hold.
type Mistake struct {
	What  string
	Op    string // forward_request or call_server_mcp_tool
	Input map[string]any
	Code  string
	Words []string
}

// CallerMistakes are inputs of forward_request and call_server_mcp_tool
// that are the caller's fault, not the sandbox's, for the server id: REST
// and MCP tests send them and want these answers. Each once answered a
// gateway or internal error.
func CallerMistakes(serverID string) []Mistake {
	fwd := func(what string, in map[string]any, words ...string) Mistake {
		in["server_id"], in["path"] = serverID, "api/health"
		return Mistake{What: what, Op: "forward_request", Input: in, Code: wire.CodeBadRequest, Words: words}
	}
	headers := func(k, v string) map[string]any { return map[string]any{"headers": map[string]any{k: v}} }
	return []Mistake{
		{What: "unknown tool", Op: "call_server_mcp_tool", Code: wire.CodeNotFound,
			Input: map[string]any{"server_id": serverID, "tool_name": "no_such_tool", "arguments": map[string]any{}},
			Words: []string{`"no_such_tool"`, "list_server_mcp_tools"}},
		fwd("CRLF in a header value", headers("X-A", "a\r\nX-Injected: 1"), "headers[X-A]", "line breaks"),
		fwd("CRLF in the method", map[string]any{"method": "GET\r\nX-Injected: 1"}, "method", "GET, HEAD"),
		fwd("TRACE", map[string]any{"method": "TRACE"}, "method", `"TRACE"`),
		fwd("CONNECT", map[string]any{"method": "connect"}, "method", `"CONNECT"`),
		fwd("a header name with a space", headers("Bad Name", "x"), "headers", `"Bad Name"`),
		fwd("a hop-by-hop header", headers("connection", "close"), "headers[connection]", "hop-by-hop"),
		fwd("Transfer-Encoding", headers("Transfer-Encoding", "chunked"), "headers[Transfer-Encoding]", "hop-by-hop"),
		fwd("a credential", headers("Authorization", "Bearer x"), "headers[Authorization]", "credential"),
		fwd("a forwarding claim", headers("X-Forwarded-For", "6.6.6.6"), "headers[X-Forwarded-For]", "forwarding"),
	}
}
