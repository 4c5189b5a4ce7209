// Package egress owns sandboxes' outbound network policy.
package egress
