package egress

import (
	"net/netip"
	"sync"
	"time"
)

// Bounds of the remembered DNS answers.
const (
	memoryEntries = 4096
	memoryTTL     = 5 * time.Minute
)

// memory remembers which names the gateway's DNS answered with which
// addresses, so that a tool that resolves a name and then connects to the
// address is judged by the name. Bounded: past memoryEntries the oldest
// pair is forgotten, and a pair expires memoryTTL after its last answer.
type memory struct {
	mu     sync.Mutex
	byAddr map[netip.Addr]map[string]time.Time // address → name → expiry
	order  []pair                              // ring of pairs in the order first remembered
	head   int                                 // index of the oldest pair in order
	count  int
}

type pair struct {
	addr netip.Addr
	name string
}

func newMemory() *memory {
	return &memory{byAddr: map[netip.Addr]map[string]time.Time{}, order: make([]pair, memoryEntries)}
}

// remember records that name was answered with addr at now.
func (m *memory) remember(name string, addr netip.Addr, now time.Time) {
	addr = addr.Unmap()
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.byAddr[addr]
	if _, ok := names[name]; ok {
		names[name] = now.Add(memoryTTL)
		return
	}
	if m.count == len(m.order) {
		old := m.order[m.head]
		m.forget(old)
		m.head = (m.head + 1) % len(m.order)
		m.count--
	}
	if names == nil {
		names = map[string]time.Time{}
		m.byAddr[addr] = names
	}
	names[name] = now.Add(memoryTTL)
	m.order[(m.head+m.count)%len(m.order)] = pair{addr, name}
	m.count++
}

func (m *memory) forget(p pair) {
	names := m.byAddr[p.addr]
	delete(names, p.name)
	if len(names) == 0 {
		delete(m.byAddr, p.addr)
	}
}

// names returns the names addr was recently given for.
func (m *memory) names(addr netip.Addr, now time.Time) []string {
	addr = addr.Unmap()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name, exp := range m.byAddr[addr] {
		if now.Before(exp) {
			out = append(out, name)
		}
	}
	return out
}
