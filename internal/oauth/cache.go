package oauth

import (
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
)

// principalTTL is how long a resolved access token is trusted without
// asking the database again, as for session tokens: it bounds how late a
// revocation on another replica, a new role binding or a disabled user
// takes effect. Revocations through this server clear the cache at once.
const principalTTL = 2 * time.Second

// principalCacheMax bounds the cache; when full it is emptied.
const principalCacheMax = 10000

// principalCache remembers recently resolved access tokens by hash.
type principalCache struct {
	mu      sync.Mutex
	entries map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p       rbac.Principal
	expires time.Time
}

func (c *principalCache) get(hash []byte, now time.Time) (rbac.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok || !now.Before(e.expires) {
		return rbac.Principal{}, false
	}
	return e.p, true
}

// put remembers p until the earlier of the cache lifetime and the token's
// expiry.
func (c *principalCache) put(hash []byte, p rbac.Principal, now, tokenExpiry time.Time) {
	exp := now.Add(principalTTL)
	if tokenExpiry.Before(exp) {
		exp = tokenExpiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= principalCacheMax {
		c.entries = map[string]cachedPrincipal{}
	}
	c.entries[string(hash)] = cachedPrincipal{p: p, expires: exp}
}

func (c *principalCache) forget() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}
