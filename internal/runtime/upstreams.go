package runtime

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// UpstreamsDir is where the agent reads its upstream declarations inside
// every sandbox: berth's declarations, mounted read-only, so what
// start_server declared is what the sandbox's gateway is told (a sandbox
// that wants more runs a gateway of its own; root in a sandbox can
// always answer in its agent's place anyway). Under /run, which is the
// sandbox's own on every runtime and never part of an image's files.
const UpstreamsDir = "/run/berth-mcp/upstreams.d"

// Upstream is one MCP server inside a sandbox, validated by the
// orchestrator: Name is an RFC 1123 label, URL is http or https.
type Upstream struct {
	Name    string
	URL     string
	Headers map[string]string
}

// upstreamFile is the content of one <name>.json file, the format
// berth-agent's gateway reads (internal/agent/mcpgw, config.go) and
// IdeGYM's mcp-upstreams.d files have.
type upstreamFile struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// UpstreamFiles returns the declaration files of ups by file name
// (<name>.json). Names are checked again here because they become file
// names: a name with a slash or a dot must never reach a filesystem call.
func UpstreamFiles(ups []Upstream) (map[string][]byte, error) {
	files := make(map[string][]byte, len(ups))
	for _, u := range ups {
		if !label.MatchString(u.Name) {
			return nil, fmt.Errorf("upstream name %q is not an RFC 1123 label", u.Name)
		}
		b, err := json.Marshal(upstreamFile{URL: u.URL, Headers: u.Headers})
		if err != nil {
			return nil, fmt.Errorf("encode upstream %s: %w", u.Name, err)
		}
		name := u.Name + ".json"
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("upstream %s is declared twice", u.Name)
		}
		files[name] = b
	}
	return files, nil
}

// label is an RFC 1123 label.
var label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
