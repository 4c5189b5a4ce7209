package auth

import (
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
)

// PrincipalTTL is how long an authenticator may trust a resolved
// credential without asking the database again. It bounds how late a
// revocation on another replica, a new role binding or a disabled user
// takes effect: two seconds of staleness traded for not paying several
// queries on every request. Revocations through the same replica clear
// its cache at once (Forget).
const PrincipalTTL = 2 * time.Second

// principalCacheMax bounds a cache; when full it is emptied rather than
// tracking recency, which is simpler and costs one miss per credential.
const principalCacheMax = 10000

// PrincipalCache remembers recently resolved credentials by their hash.
// It is a cache only: the database stays the source of truth. The zero
// value is ready to use and safe for concurrent use.
type PrincipalCache struct {
	mu      sync.Mutex
	entries map[string]cachedPrincipal
}

type cachedPrincipal struct {
	p       rbac.Principal
	expires time.Time
}

// Get returns the principal remembered for hash, if still fresh at now.
func (c *PrincipalCache) Get(hash []byte, now time.Time) (rbac.Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok || !now.Before(e.expires) {
		return rbac.Principal{}, false
	}
	return e.p, true
}

// Put remembers p until the earlier of PrincipalTTL from now and the
// credential's own expiry (zero: none).
func (c *PrincipalCache) Put(hash []byte, p rbac.Principal, now, expiry time.Time) {
	exp := now.Add(PrincipalTTL)
	if !expiry.IsZero() && expiry.Before(exp) {
		exp = expiry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= principalCacheMax {
		c.entries = map[string]cachedPrincipal{}
	}
	c.entries[string(hash)] = cachedPrincipal{p: p, expires: exp}
}

// Forget drops every entry.
func (c *PrincipalCache) Forget() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}
