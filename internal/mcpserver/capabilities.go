package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// unadvertised are the methods the go-sdk would answer although berth
// declares no capability for them: berth has no resources and sends no
// log messages, so it advertises neither, and a client that relied on an
// answer anyway would be relying on something berth never promised.
// Capabilities advertised are methods answered; these get -32601.
var unadvertised = map[string]string{
	"logging/setLevel":         "logging",
	"resources/list":           "resources",
	"resources/templates/list": "resources",
	"resources/read":           "resources",
	"resources/subscribe":      "resources",
	"resources/unsubscribe":    "resources",
}

// answerOnlyAdvertised refuses the methods of capabilities berth does
// not declare, before the SDK's handlers see them; it runs for every
// message, of a batch too.
func answerOnlyAdvertised(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if capability, ok := unadvertised[method]; ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: "method not found: " + method + " (berth declares no " + capability + " capability)"}
		}
		return next(ctx, method, req)
	}
}
