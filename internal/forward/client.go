package forward

import (
	"net/http"
	"sync/atomic"

	"github.com/berth-mcp/berth/internal/wire"
)

// RoundTripper returns a transport for HTTP clients of target's agent,
// such as the MCP client of berth's bridge to in-sandbox MCP servers. It
// applies ServeHTTP's rules: every request loses the caller's credentials
// and forwarding claims and carries the agent token, every response is
// sanitized (SanitizeResponse), and every body is cut at maxBody bytes
// and counts against f.Budget until closed (as in ReadBody), so a client that
// reads answers whole stays bounded.
func (f *Forwarder) RoundTripper(target Target, maxBody int64) *AgentTransport {
	return &AgentTransport{f: f, target: target, maxBody: maxBody}
}

// AgentTransport is the http.RoundTripper RoundTripper returns.
type AgentTransport struct {
	f       *Forwarder
	target  Target
	maxBody int64
	tripped atomic.Pointer[error]
}

// Exceeded returns the error of the first answer that ran past the limit,
// or nil. Clients such as the MCP SDK's report a body cut short only as a
// broken stream; this says why.
func (t *AgentTransport) Exceeded() error {
	if p := t.tripped.Load(); p != nil {
		return *p
	}
	return nil
}

// RoundTrip implements http.RoundTripper.
func (t *AgentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.f.Transports == nil {
		return nil, wire.Errorf(wire.CodeInternal, "server %s: forwarder has no transports", t.target.ServerID)
	}
	// A RoundTripper must not change the caller's request.
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = agentHost, ""
	PrepareHeader(r.Header, t.target.Token)
	resp, err := t.f.Transports.For(t.target.Endpoint).RoundTrip(r)
	if err != nil {
		if cut := Cut(r.Context()); cut != nil {
			return nil, cut
		}
		if r.Context().Err() != nil {
			return nil, err
		}
		return nil, gatewayError(t.target.ServerID, err)
	}
	SanitizeResponse(resp)
	trip := func(err error) { t.tripped.CompareAndSwap(nil, &err) }
	if resp.ContentLength > t.maxBody {
		resp.Body.Close()
		err := tooLarge(t.target.ServerID, t.maxBody)
		trip(err)
		return nil, err
	}
	resp.Body = t.f.limitBody(r.Context(), resp.Body, t.maxBody, resp.ContentLength, t.target.ServerID, trip)
	return resp, nil
}
