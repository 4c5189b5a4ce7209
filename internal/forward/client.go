package forward

import (
	"net/http"

	"github.com/berth-mcp/berth/internal/wire"
)

// RoundTripper returns a transport for HTTP clients of target's agent,
// such as the MCP client of berth's bridge to in-sandbox MCP servers. It
// applies ServeHTTP's rules: every request loses the caller's credentials
// and forwarding claims and carries the agent token, every response is
// sanitized (SanitizeResponse), and every body is cut at maxBody bytes
// (LimitBody), so a client that reads answers whole stays bounded.
func (f *Forwarder) RoundTripper(target Target, maxBody int64) http.RoundTripper {
	return agentRoundTripper{f: f, target: target, maxBody: maxBody}
}

type agentRoundTripper struct {
	f       *Forwarder
	target  Target
	maxBody int64
}

func (t agentRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.f.Transports == nil {
		return nil, wire.Errorf(wire.CodeInternal, "server %s: forwarder has no transports", t.target.ServerID)
	}
	// A RoundTripper must not change the caller's request.
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = agentHost, ""
	prepareHeader(r.Header, t.target.Token)
	resp, err := t.f.Transports.For(t.target.Endpoint).RoundTrip(r)
	if err != nil {
		if r.Context().Err() != nil {
			return nil, err
		}
		return nil, gatewayError(t.target.ServerID, err)
	}
	SanitizeResponse(resp)
	resp.Body = LimitBody(resp.Body, t.maxBody, t.target.ServerID)
	return resp, nil
}
