// Package forward carries HTTP and WebSocket traffic from the berth server
// to one sandbox's agent: it rewrites the path, strips the caller's
// credentials, injects the per-sandbox agent token, streams bodies both
// ways and keeps one pool of keep-alive connections per agent endpoint.
//
// Whatever comes back is untrusted (root in a sandbox can answer in its
// agent's place): every response is sanitized before it is relayed or
// returned (SanitizeResponse), answer headers are bounded, and bodies that
// berth reads whole are bounded by the caller's limit and, together, by a
// memory budget (ReadBody, RoundTripper).
//
// It owns the transport only. Whether a caller may reach a sandbox, and
// which sandbox a request is for, is decided by the orchestrator before it
// calls in here.
package forward
