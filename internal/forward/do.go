package forward

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/wire"
)

// Do sends one request to the agent of target and returns its response,
// whatever the status, sanitized as SanitizeResponse says; the caller
// closes the body and bounds what it reads of it (ReadBody). It is for berth's own
// calls (run_bash_command, session exec, file tools) and applies the same
// path and header rules as ServeHTTP; unlike there, path may end in a
// query ("api/fs/cat?path=a.txt"), which is sent as given. Redirects are
// not followed. An agent that cannot be reached gives an error with code
// bad_gateway, one cut by a deadline of ctx (Bound, WithIdle)
// gateway_timeout; every error names the server.
func (f *Forwarder) Do(ctx context.Context, target Target, method, path string, header http.Header, body io.Reader) (*http.Response, error) {
	if f.Transports == nil {
		return nil, wire.Errorf(wire.CodeInternal, "server %s: forwarder has no transports", target.ServerID)
	}
	path, query, _ := strings.Cut(path, "?")
	decoded, escaped, err := agentURLPath(path)
	if err == nil && strings.Contains(query, "#") {
		err = wire.Errorf(wire.CodeBadRequest, "query %q must not contain #", query)
	}
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", target.ServerID, err)
	}
	if f.Observe != nil {
		var done observe.Done
		ctx, done = f.Observe(ctx)
		resp, err := f.do(ctx, target, method, decoded, escaped, query, header, body)
		done(err)
		return resp, err
	}
	return f.do(ctx, target, method, decoded, escaped, query, header, body)
}

func (f *Forwarder) do(ctx context.Context, target Target, method, decoded, escaped, query string, header http.Header, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+agentHost, body)
	if err != nil {
		return nil, fmt.Errorf("server %s: build request: %w", target.ServerID, err)
	}
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = decoded, escaped, query
	if header != nil {
		req.Header = header.Clone()
	}
	PrepareHeader(req.Header, target.Token)
	if f.Inject != nil {
		f.Inject(ctx, req.Header)
	}
	resp, err := f.Transports.For(target.Endpoint).RoundTrip(req)
	if err != nil {
		if cut := Cut(ctx); cut != nil {
			return nil, cut
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("server %s: %s %s: %w", target.ServerID, method, escaped, err)
		}
		return nil, gatewayError(target.ServerID, err)
	}
	SanitizeResponse(resp)
	return resp, nil
}
