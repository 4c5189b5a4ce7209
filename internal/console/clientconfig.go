package console

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/web"
)

// The ready-to-paste client configurations of the tokens page. They are
// built here as values and encoded with encoding/json, so a URL or a
// token can never break out of the JSON or shell quoting they sit in;
// the templates escape them again as text.

// mcpName is the name the configurations give berth in a client.
const mcpName = "berth"

// Structs rather than maps where people read the order: the kind of
// server first, then where it is, then how to authenticate.
type httpServer struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

type stdioServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

type promptInput struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Description string `json:"description"`
	Password    bool   `json:"password"`
}

func indentJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// vscodeInstallLink is VS Code's click-to-install URL for an MCP server.
func vscodeInstallLink(server httpServer) string {
	b, _ := json.Marshal(struct {
		Name string `json:"name"`
		httpServer
	}{mcpName, server})
	return "vscode:mcp/install?" + url.PathEscape(string(b))
}

// oauthConfigs need no token: the client signs the user in through
// berth's OAuth server.
func oauthConfigs(mcpURL string) []web.ClientConfig {
	server := httpServer{Type: "http", URL: mcpURL}
	return []web.ClientConfig{
		{
			ID: "vscode-oauth", Client: "VS Code", Where: ".vscode/mcp.json (or the user mcp.json)",
			Text:        indentJSON(map[string]any{"servers": map[string]httpServer{mcpName: server}}),
			InstallLink: vscodeInstallLink(server),
			Note:        "VS Code opens berth's sign-in page when it first connects.",
		},
		{
			ID: "claude-desktop-connector", Client: "Claude Desktop and claude.ai", Where: "Settings > Connectors > Add custom connector",
			Text: mcpURL,
			Note: "Paste the URL as the connector's address; you approve the connection on berth's consent page.",
		},
		{
			ID: "claude-code-oauth", Client: "Claude Code", Where: "a terminal",
			Text: "claude mcp add --transport http " + mcpName + " " + shellQuote(mcpURL),
			Note: "Then run /mcp in Claude Code to sign in.",
		},
	}
}

// tokenConfigs carry the new token: each works as pasted.
func tokenConfigs(publicURL, mcpURL, token string) []web.ClientConfig {
	bearer := "Bearer " + token
	return []web.ClientConfig{
		{
			ID: "vscode-token", Client: "VS Code", Where: ".vscode/mcp.json (or the user mcp.json)",
			Text: indentJSON(struct {
				Inputs  []promptInput         `json:"inputs"`
				Servers map[string]httpServer `json:"servers"`
			}{
				[]promptInput{{Type: "promptString", ID: "berth-token", Description: "berth session token", Password: true}},
				map[string]httpServer{mcpName: {Type: "http", URL: mcpURL, Headers: map[string]string{"Authorization": "Bearer ${input:berth-token}"}}},
			}),
			Note: "VS Code asks for the token once and keeps it in its secret storage, so it is not written into the file.",
		},
		{
			ID: "claude-code", Client: "Claude Code", Where: "a terminal",
			Text: "claude mcp add --transport http " + mcpName + " " + shellQuote(mcpURL) + " --header " + shellQuote("Authorization: "+bearer),
		},
		{
			ID: "cursor", Client: "Cursor", Where: "~/.cursor/mcp.json",
			Text: indentJSON(map[string]any{"mcpServers": map[string]httpServer{mcpName: {URL: mcpURL, Headers: map[string]string{"Authorization": bearer}}}}),
		},
		{
			ID: "claude-desktop-mcp-remote", Client: "Claude Desktop (mcp-remote)", Where: "claude_desktop_config.json",
			Text: indentJSON(map[string]any{"mcpServers": map[string]stdioServer{mcpName: {
				Command: "npx", Args: []string{"mcp-remote", mcpURL, "--header", "Authorization:${BERTH_AUTH_HEADER}"},
				Env: map[string]string{"BERTH_AUTH_HEADER": bearer},
			}}}),
			Note: "The header is passed through an environment variable because some systems split arguments at spaces.",
		},
		{
			ID: "claude-desktop-stdio", Client: "Claude Desktop (berth mcp over stdio)", Where: "claude_desktop_config.json, with the berth CLI installed",
			Text: indentJSON(map[string]any{"mcpServers": map[string]stdioServer{mcpName: {
				Command: "berth", Args: []string{"mcp"}, Env: map[string]string{"BERTH_URL": publicURL, "BERTH_TOKEN": token},
			}}}),
		},
		{
			ID: "curl", Client: "curl", Where: "a terminal",
			Text: "curl -sS " + shellQuote(mcpURL) + " \\\n  -H " + shellQuote("Authorization: "+bearer) +
				" \\\n  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n" +
				"  -H 'MCP-Protocol-Version: 2025-11-25' \\\n" +
				"  -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}'",
			Note: "Or the REST API: curl -sS -H " + shellQuote("Authorization: "+bearer) + " " + shellQuote(publicURL+"/api/whoami"),
		},
	}
}
