package egress

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/netguard"
)

// hostAddrsTTL is how long the host's interface addresses are trusted
// before they are read again: addresses change rarely, connections are
// many.
const hostAddrsTTL = 3 * time.Second

// Guard decides which addresses a sandbox may reach at all, whatever its
// policy. It is safe for concurrent use; do not copy it once used.
type Guard struct {
	// Reachable are ranges the operator made reachable although the fixed
	// rule refuses them (flag --egress-reachable), e.g. the tests'
	// 203.0.113.0/24.
	Reachable []netip.Prefix
	// Never are addresses always refused, even inside Reachable: berth's
	// own listening addresses and the database's. Port 0 means any port;
	// an unspecified address (berth listening on 0.0.0.0:8080) means
	// every address of the host, loopback included, on that port.
	Never []netip.AddrPort

	// interfaceAddrs lists the host's addresses (net.InterfaceAddrs when nil).
	interfaceAddrs func() ([]net.Addr, error)

	mu       sync.Mutex
	hostAddr map[netip.Addr]bool
	readAt   time.Time
}

// Check returns nil or a *Refusal naming the rule that refuses addr:
// "unspecified", "multicast", "broadcast", "berth itself", "host address",
// or internal/netguard's reason. The order: the first three always;
// then Never; then Reachable allows; then the host's own addresses; then
// the public-address rule.
func (g *Guard) Check(addr netip.AddrPort) error {
	ip := addr.Addr().Unmap().WithZone("")
	refuse := func(reason string) error {
		return &Refusal{Addr: netip.AddrPortFrom(ip, addr.Port()), Port: addr.Port(), Reason: reason, Time: time.Now()}
	}
	if !ip.IsValid() {
		return refuse("invalid address")
	}
	switch reason, _ := netguard.Check(ip); reason {
	case "unspecified", "multicast", "broadcast":
		return refuse(reason)
	}
	for _, n := range g.Never {
		if n.Port() != 0 && n.Port() != addr.Port() {
			continue
		}
		na := n.Addr().Unmap().WithZone("")
		if na == ip || na.IsUnspecified() && (ip.IsLoopback() || g.isHostAddr(ip)) {
			return refuse(reasonBerthItself)
		}
	}
	for _, p := range g.Reachable {
		if p.Contains(ip) {
			return nil
		}
	}
	// Loopback is on the host's interfaces too; "loopback" says more.
	if !ip.IsLoopback() && g.isHostAddr(ip) {
		return refuse(reasonHostAddress)
	}
	if reason, ok := netguard.Check(ip); !ok {
		return refuse(reason)
	}
	return nil
}

// isHostAddr reports whether ip is one of the host's interface addresses,
// read again when the cached list is older than hostAddrsTTL. A failed
// read keeps the last list: the public-address rule still applies.
func (g *Guard) isHostAddr(ip netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hostAddr == nil || time.Since(g.readAt) > hostAddrsTTL {
		list := g.interfaceAddrs
		if list == nil {
			list = net.InterfaceAddrs
		}
		if addrs, err := list(); err == nil {
			m := make(map[netip.Addr]bool, len(addrs))
			for _, a := range addrs {
				var nip net.IP
				switch a := a.(type) {
				case *net.IPNet:
					nip = a.IP
				case *net.IPAddr:
					nip = a.IP
				}
				if h, ok := netip.AddrFromSlice(nip); ok {
					m[h.Unmap()] = true
				}
			}
			g.hostAddr = m
			g.readAt = time.Now()
		}
	}
	return g.hostAddr[ip]
}
