package egress

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Refusal is a refused connection or lookup: what the sandbox asked for
// and the rule that refused it.
type Refusal struct {
	Name   string         // the name asked for ("" when the sandbox gave an address)
	Addr   netip.AddrPort // zero when refused before resolving
	Port   uint16         // the port asked for, also when Addr is zero (0 for a DNS question)
	Reason string         // "policy none", "not in allowlist", "private range", "rate limit"...: short, stable, also a metric label
	Time   time.Time
}

// Error reads like "egress refused: 10.0.0.5:5432 (db.example.com), private range".
func (r *Refusal) Error() string {
	var b strings.Builder
	b.WriteString("egress refused: ")
	switch {
	case r.Addr.IsValid() && r.Name != "":
		b.WriteString(r.Addr.String() + " (" + r.Name + ")")
	case r.Addr.IsValid():
		b.WriteString(r.Addr.String())
	case r.Name != "" && r.Port != 0:
		b.WriteString(r.Name + ":" + strconv.Itoa(int(r.Port)))
	case r.Name != "":
		b.WriteString(r.Name)
	default:
		b.WriteString("connection")
	}
	b.WriteString(", " + r.Reason)
	return b.String()
}

// target names what was refused for a person: "10.0.0.5:5432",
// "evil.com:443", "db.example.com:5432 at 10.0.0.5".
func (r *Refusal) target() string {
	port := ""
	if r.Port != 0 {
		port = ":" + strconv.Itoa(int(r.Port))
	}
	switch {
	case r.Addr.IsValid() && r.Name != "":
		return r.Name + port + " at " + r.Addr.Addr().String()
	case r.Addr.IsValid():
		return r.Addr.String()
	case r.Name != "":
		return r.Name + port
	}
	return "connection"
}

// Refusal reasons the gateway gives itself; the address rule's come from
// Guard and internal/netguard.
const (
	reasonPolicyNone     = "policy none"
	reasonNotAllowed     = "not in allowlist"
	reasonPolicyError    = "policy unavailable"
	reasonInvalidName    = "invalid name"
	reasonInvalidPort    = "invalid port"
	reasonConnLimit      = "connection limit"
	reasonByteLimit      = "byte limit"
	reasonBerthItself    = "berth itself"
	reasonHostAddress    = "host address"
	reasonNoAddress      = "no allowed address"
	reasonUnsupportedReq = "unsupported request"
)
