package catalog

import "context"

// SessionHeader is the header that names a caller's bash session, as
// cli-mcp-server's clients send it: bash without a server runs in the
// sandbox of that session.
const SessionHeader = "X-Session-ID"

type sessionKey struct{}

// WithSession returns a context carrying the session a request's
// SessionHeader named, for the operations that default to it.
func WithSession(ctx context.Context, session string) context.Context {
	if session == "" {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, session)
}

// sessionOr is the session given in the input, or else the one the
// request's header named.
func sessionOr(ctx context.Context, given string) string {
	if given != "" {
		return given
	}
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}
