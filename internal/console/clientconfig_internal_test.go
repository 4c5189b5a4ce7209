package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every configuration is valid as what it claims to be and carries what
// it needs, whatever characters the URL holds.
func TestClientConfigs(t *testing.T) {
	const public = "https://berth.example.com/a'b"
	const token = "berth_abc-DEF_123"
	mcp := public + "/mcp"
	for _, c := range append(tokenConfigs(public, mcp, token), oauthConfigs(mcp)...) {
		text := c.Text
		if strings.HasPrefix(text, "{") {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Errorf("%s is not JSON: %v\n%s", c.ID, err, text)
			}
		}
		want := mcp
		if c.ID == "claude-desktop-stdio" {
			want = public // berth mcp finds /mcp itself
		}
		if !strings.Contains(text, want) && !strings.Contains(text, strings.ReplaceAll(want, "'", `'\''`)) {
			t.Errorf("%s lacks the MCP URL:\n%s", c.ID, text)
		}
		if strings.HasPrefix(c.ID, "vscode") || strings.HasSuffix(c.ID, "oauth") || c.ID == "claude-desktop-connector" {
			if strings.Contains(text, token) {
				t.Errorf("%s writes the token into a file that needs none:\n%s", c.ID, text)
			}
			continue
		}
		if !strings.Contains(text, token) {
			t.Errorf("%s lacks the token:\n%s", c.ID, text)
		}
	}
	link := vscodeInstallLink(httpServer{Type: "http", URL: mcp})
	if !strings.HasPrefix(link, "vscode:mcp/install?") || strings.ContainsAny(link[len("vscode:mcp/install?"):], `"{} '`) {
		t.Errorf("install link not escaped: %s", link)
	}
}
