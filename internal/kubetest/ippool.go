package kubetest

import (
	"errors"
	"net/netip"
	"sync"
)

// ipPool hands each pod its own loopback address, 127.0.0.2 upwards
// (127.0.0.1 is the Nodes' address). Linux routes all of 127.0.0.0/8 to
// the loopback device, so a process can bind one without setup. Freed
// addresses are reused only after the range wraps, so a client still
// holding a deleted pod's address does not reach its successor.
type ipPool struct {
	mu    sync.Mutex
	next  netip.Addr
	inUse map[netip.Addr]bool
}

var errNoPodIP = errors.New("kubetest: no free pod IP in 127.0.0.0/8")

func newIPPool() *ipPool {
	return &ipPool{next: netip.AddrFrom4([4]byte{127, 0, 0, 2}), inUse: map[netip.Addr]bool{}}
}

func (p *ipPool) get() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := netip.AddrFrom4([4]byte{127, 0, 0, 2})
	for range 1 << 24 {
		a := p.next
		p.next = a.Next()
		b := p.next.As4()
		if b[0] != 127 || b[3] == 255 { // past the range or a broadcast-looking .255
			if b[0] != 127 {
				p.next = first
			} else {
				p.next = p.next.Next()
			}
		}
		if !p.inUse[a] {
			p.inUse[a] = true
			return a.String(), nil
		}
	}
	return "", errNoPodIP
}

func (p *ipPool) put(ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, a)
}
