package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Ceiling is the widest policy the operator lets members choose (berth
// serve flags). Modes order none < allowlist < public. A public ceiling
// permits everything; a none ceiling only none; an allowlist ceiling
// permits none and the allowlists whose every entry it covers: the same
// name or a wildcard over it, a prefix inside one of its prefixes, and
// the same port, where a ceiling entry without a port covers any port.
// A ceiling with no mode is treated as none.
type Ceiling Policy

func (c Ceiling) String() string {
	if c.Egress == "" {
		return string(None)
	}
	return Policy(c).String()
}

// Permits says whether p is within c; the error names the first entry
// (or the mode) beyond it and the ceiling.
func (c Ceiling) Permits(p Policy) error {
	pes, err := p.entries()
	if err != nil {
		return err
	}
	mode := c.Egress
	if mode == "" {
		mode = None
	}
	if mode == Public {
		return nil
	}
	if p.Egress.rank() > mode.rank() {
		return fmt.Errorf("network: egress %q is not within the operator's ceiling (%s)", p.Egress, c)
	}
	if p.Egress != Allowlist {
		return nil
	}
	ces, err := Policy{Egress: Allowlist, Allow: c.Allow}.entries()
	if err != nil {
		return fmt.Errorf("network: the operator's ceiling is invalid: %s", strings.TrimPrefix(err.Error(), "network: "))
	}
	for i, e := range pes {
		covered := false
		for _, ce := range ces {
			if ce.covers(e) {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Errorf("network: %q is not within the operator's ceiling (%s)", p.Allow[i], c)
		}
	}
	return nil
}

// covers reports whether every connection e admits, c admits too.
func (c entry) covers(e entry) bool {
	if c.port != 0 && c.port != e.port {
		return false
	}
	if c.prefix.IsValid() || e.prefix.IsValid() {
		return c.prefix.IsValid() && e.prefix.IsValid() && prefixCovers(c.prefix, e.prefix)
	}
	switch {
	case !c.wildcard:
		return !e.wildcard && c.name == e.name
	case e.wildcard:
		// *.x covers *.x and *.y.x.
		return e.name == c.name || strings.HasSuffix(e.name, "."+c.name)
	default:
		return strings.HasSuffix(e.name, "."+c.name)
	}
}

func prefixCovers(outer, inner netip.Prefix) bool {
	return outer.Addr().BitLen() == inner.Addr().BitLen() && outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}
