// Package netguard owns berth's rule for which IP addresses are public:
// the one place that says an address is loopback, private, link-local,
// cloud metadata, or otherwise not a public unicast host. The OAuth client
// metadata fetcher and the sandbox egress gateway both refuse what it
// refuses, so the two never disagree about what "internal" means.
package netguard
