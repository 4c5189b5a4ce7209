// Package egress owns a sandbox's outbound network: the policy a member
// chooses (none, an allowlist, or the public internet), the ceiling the
// operator sets on it, the address rule no policy can lift (Guard), and
// the Gateway that enforces all three.
//
// A sandbox's network namespace has only loopback, so it cannot reach
// anything by itself. berth serves, inside that namespace, an HTTP and
// SOCKS5 proxy and a DNS server (Gateway.Serve); every connection out is
// decided there and dialled by berth from its own namespace, to exactly
// the address that was checked. Names are resolved by berth, never by the
// sandbox, so DNS rebinding to loopback or private addresses is refused
// like any other address, and the DNS answers the gateway gives are
// remembered so that a tool that resolves first and connects by address
// is judged by the name it resolved.
//
// Where sandboxes share listeners (Kubernetes: one proxy and DNS port for
// every sandbox pod), the runtime attributes each connection and DNS
// message to its sandbox and hands it to that sandbox's started gateway
// (Start, then ServeConn, ServeDNSConn, AnswerDNS); the gateway's bounds
// stay per sandbox.
package egress
