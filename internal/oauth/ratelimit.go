package oauth

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is a token bucket: up to Burst events at once, refilled at
// PerMinute events a minute. The zero value stands for the default of the
// limit it configures; a negative PerMinute turns the limit off.
type RateLimit struct {
	PerMinute float64
	// Burst zero is half of PerMinute, at least 1.
	Burst int
}

// Default limits.
var (
	defaultRegistrationLimit = RateLimit{PerMinute: 10, Burst: 5}
	defaultCIMDHostLimit     = RateLimit{PerMinute: 30, Burst: 10}
	defaultCIMDTotalLimit    = RateLimit{PerMinute: 120, Burst: 30}
)

// Bounds of the per-key bucket maps: enough for every real client, small
// enough that a flood of addresses or hosts cannot grow memory.
const (
	maxRegistrationBuckets = 10000
	maxCIMDHostBuckets     = 1024
)

// withDefault checks l and fills in def for the zero value and the
// default burst.
func (l RateLimit) withDefault(name string, def RateLimit) (RateLimit, error) {
	if math.IsNaN(l.PerMinute) || math.IsInf(l.PerMinute, 0) || l.Burst < 0 {
		return l, fmt.Errorf("oauth: %s: rate %v per minute with burst %d is not a valid limit", name, l.PerMinute, l.Burst)
	}
	if l.PerMinute == 0 {
		if l.Burst != 0 {
			return l, fmt.Errorf("oauth: %s: burst %d without a rate; set PerMinute too", name, l.Burst)
		}
		return def, nil
	}
	if l.PerMinute > 0 && l.Burst == 0 {
		l.Burst = max(1, int(l.PerMinute/2))
	}
	return l, nil
}

// limiter returns a bucket of this limit; one that always allows when the
// limit is off.
func (l RateLimit) limiter() *rate.Limiter {
	if l.PerMinute <= 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(l.PerMinute/60), l.Burst)
}

// buckets are token buckets by key (a client address, a host), at most
// maxKeys of them. A bucket that has refilled completely is the same as a
// new one, so those are dropped first when room is needed.
type buckets[K comparable] struct {
	limit   RateLimit
	maxKeys int

	mu sync.Mutex
	m  map[K]*rate.Limiter
}

func newBuckets[K comparable](l RateLimit, maxKeys int) *buckets[K] {
	return &buckets[K]{limit: l, maxKeys: maxKeys, m: map[K]*rate.Limiter{}}
}

// get returns key's bucket, creating it.
func (b *buckets[K]) get(key K, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.m[key]; ok {
		return l
	}
	if b.limit.PerMinute <= 0 {
		// Nothing to remember for a limit that is off.
		return b.limit.limiter()
	}
	if len(b.m) >= b.maxKeys {
		for k, l := range b.m {
			if l.TokensAt(now) >= float64(b.limit.Burst) {
				delete(b.m, k)
			}
		}
		// Still full: everyone is busy. Drop an arbitrary eighth rather
		// than one at a time, so the sweep above is not paid per request.
		for k := range b.m {
			if len(b.m) <= b.maxKeys-max(1, b.maxKeys/8) {
				break
			}
			delete(b.m, k)
		}
	}
	l := b.limit.limiter()
	b.m[key] = l
	return l
}

// spend takes one token from each limiter at now, or from none: when any
// is empty it returns the longest wait until all would have one.
func spend(now time.Time, ls ...*rate.Limiter) time.Duration {
	rs := make([]*rate.Reservation, 0, len(ls))
	var wait time.Duration
	for _, l := range ls {
		r := l.ReserveN(now, 1)
		rs = append(rs, r)
		if !r.OK() {
			wait = max(wait, time.Minute)
			continue
		}
		wait = max(wait, r.DelayFrom(now))
	}
	if wait > 0 {
		for _, r := range rs {
			r.CancelAt(now)
		}
	}
	return wait
}

// retrySeconds is a wait as whole seconds for Retry-After, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// clientAddr is the address a request comes from, as the key of its rate
// limit: the connection's peer, or, when that is a trusted proxy, the
// nearest address in X-Forwarded-For that is not one. An IPv6 client is
// keyed by its /64, which a single host usually holds whole.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Prefix {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		// Not an IP connection (tests, unix sockets): one shared bucket.
		return netip.Prefix{}
	}
	addr := peer.Addr().Unmap().WithZone("")
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, ok := parseHop(hops[i])
			if !ok {
				// A malformed entry was not written by a trusted proxy;
				// the last trusted one is as far as the chain holds.
				break
			}
			addr = hop
			if !isTrusted(hop, trusted) {
				break
			}
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p
	}
	return netip.PrefixFrom(addr, addr.BitLen())
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}
