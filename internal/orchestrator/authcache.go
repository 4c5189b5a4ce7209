package orchestrator

import (
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
)

// principalTTL is how long a resolved session token is trusted without
// asking the database again. It bounds how late a revocation, a new role
// binding or a disabled user takes effect on a replica: a trade of two
// seconds of staleness for not paying two queries on every request.
const principalTTL = 2 * time.Second

// principalCacheMax bounds the cache; when full it is emptied rather than
// tracking recency, which is simpler and costs one miss per token.
const principalCacheMax = 10000

// principalCache remembers recently resolved tokens by their hash. It is
// a cache only: the database stays the source of truth.
type principalCache struct {
	mu      sync.Mutex
	entries map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p       rbac.Principal
	expires time.Time
}

func (c *principalCache) get(hash string, now time.Time) (rbac.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || now.After(e.expires) {
		return rbac.Principal{}, false
	}
	return e.p, true
}

// put remembers p until the earlier of the cache lifetime and the token's
// own expiry.
func (c *principalCache) put(hash string, p rbac.Principal, now time.Time, tokenExpiry *time.Time) {
	exp := now.Add(principalTTL)
	if tokenExpiry != nil && tokenExpiry.Before(exp) {
		exp = *tokenExpiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= principalCacheMax {
		c.entries = map[string]cachedPrincipal{}
	}
	c.entries[hash] = cachedPrincipal{p: p, expires: exp}
}

// forget drops every entry, so a revocation made through this replica
// takes effect on it at once.
func (c *principalCache) forget() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}
