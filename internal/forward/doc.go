// Package forward carries HTTP and WebSocket traffic from the berth server
// to one sandbox's agent: it rewrites the path, strips the caller's
// credentials, injects the per-sandbox agent token, streams bodies both
// ways and keeps one pool of keep-alive connections per agent endpoint.
//
// It owns the transport only. Whether a caller may reach a sandbox, and
// which sandbox a request is for, is decided by the orchestrator before it
// calls in here.
package forward
