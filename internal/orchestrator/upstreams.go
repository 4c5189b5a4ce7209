package orchestrator

import (
	"fmt"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// MCPUpstream declares an MCP server that will run inside the sandbox, for
// its agent to proxy: its tools are listed as <name>_<tool>. It is what
// IdeGYM's /etc/idegym/mcp-upstreams.d/<name>.json files hold.
type MCPUpstream struct {
	Name    string            `json:"name" jsonschema:"tool prefix: an RFC 1123 label (lower-case letters, digits and '-', at most 63)"`
	URL     string            `json:"url" jsonschema:"the server's MCP endpoint as seen inside the sandbox, e.g. http://127.0.0.1:9000/mcp (streamable HTTP, or SSE as a fallback)"`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"HTTP headers sent with every request to it, e.g. Authorization (values are stored encrypted)"`
}

// Limits of upstream declarations. Together they keep one declaration
// file well under the agent's 64 KiB limit for it.
const (
	maxUpstreams         = 16
	maxUpstreamURL       = 2048
	maxUpstreamHeaders   = 16
	maxUpstreamHeaderLen = 2048
)

// checkUpstreams validates start_server's mcp_upstreams and returns their
// names in order. Header values are never echoed: they are credentials.
func checkUpstreams(ups []MCPUpstream) ([]string, error) {
	if len(ups) > maxUpstreams {
		return nil, wire.Errorf(wire.CodeBadRequest, "mcp_upstreams: want at most %d upstreams, got %d", maxUpstreams, len(ups))
	}
	names := make([]string, 0, len(ups))
	seen := map[string]bool{}
	for i, u := range ups {
		field := func(f string) string { return fmt.Sprintf("mcp_upstreams[%d].%s", i, f) }
		if !namespaceRE.MatchString(u.Name) {
			return nil, wire.Errorf(wire.CodeBadRequest, "%s: want an RFC 1123 label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit), got %q", field("name"), u.Name)
		}
		if seen[u.Name] {
			return nil, wire.Errorf(wire.CodeBadRequest, "%s: %q is declared twice", field("name"), u.Name)
		}
		seen[u.Name] = true
		if err := checkUpstreamURL(field("url"), u.URL); err != nil {
			return nil, err
		}
		if len(u.Headers) > maxUpstreamHeaders {
			return nil, wire.Errorf(wire.CodeBadRequest, "%s: want at most %d headers, got %d", field("headers"), maxUpstreamHeaders, len(u.Headers))
		}
		for k, v := range u.Headers {
			if !httpguts.ValidHeaderFieldName(k) {
				return nil, wire.Errorf(wire.CodeBadRequest, "%s: want HTTP header names (RFC 9110 tokens), got %q", field("headers"), k)
			}
			if len(v) > maxUpstreamHeaderLen || strings.ContainsAny(v, "\r\n\x00") {
				return nil, wire.Errorf(wire.CodeBadRequest, "%s[%q]: want a value of at most %d bytes without line breaks or NUL", field("headers"), k, maxUpstreamHeaderLen)
			}
		}
		names = append(names, u.Name)
	}
	return names, nil
}

func checkUpstreamURL(field, raw string) error {
	if len(raw) > maxUpstreamURL {
		return wire.Errorf(wire.CodeBadRequest, "%s: want at most %d characters, got %d", field, maxUpstreamURL, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return wire.Errorf(wire.CodeBadRequest, "%s: want an http or https URL such as http://127.0.0.1:9000/mcp, got %q", field, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return wire.Errorf(wire.CodeBadRequest, "%s: want an http or https URL such as http://127.0.0.1:9000/mcp, got scheme %q", field, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return wire.Errorf(wire.CodeBadRequest, "%s: want a URL with a host such as 127.0.0.1:9000", field)
	}
	if strings.ContainsAny(raw, " \t\r\n\x00") {
		return wire.Errorf(wire.CodeBadRequest, "%s: want a URL without spaces or control characters", field)
	}
	return nil
}

// sealUpstreams is what a server row keeps of its upstreams.
func (s *Service) sealUpstreams(ups []MCPUpstream) ([]byte, error) {
	if len(ups) == 0 {
		return nil, nil
	}
	return s.seal(ups)
}

// upstreamsOf opens a server's sealed upstream declarations for its
// runtime.
func (s *Service) upstreamsOf(srv store.Server) ([]runtime.Upstream, error) {
	var ups []MCPUpstream
	if err := s.unseal(srv.UpstreamsSealed, &ups); err != nil {
		return nil, err
	}
	out := make([]runtime.Upstream, len(ups))
	for i, u := range ups {
		out[i] = runtime.Upstream(u)
	}
	return out, nil
}
