package oauth

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestRateLimitDefaults(t *testing.T) {
	for _, c := range []struct {
		in, want RateLimit
		bad      bool
	}{
		{RateLimit{}, defaultRegistrationLimit, false},
		{RateLimit{PerMinute: 30}, RateLimit{PerMinute: 30, Burst: 15}, false},
		{RateLimit{PerMinute: 1}, RateLimit{PerMinute: 1, Burst: 1}, false},
		{RateLimit{PerMinute: -1}, RateLimit{PerMinute: -1}, false},
		{RateLimit{Burst: 3}, RateLimit{}, true},
		{RateLimit{PerMinute: 5, Burst: -1}, RateLimit{}, true},
		{RateLimit{PerMinute: math.NaN()}, RateLimit{}, true},
		{RateLimit{PerMinute: math.Inf(1)}, RateLimit{}, true},
	} {
		got, err := c.in.withDefault("RegistrationLimit", defaultRegistrationLimit)
		if c.bad {
			if err == nil {
				t.Errorf("%+v accepted", c.in)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: got %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	if defaultRegistrationLimit != (RateLimit{PerMinute: 10, Burst: 5}) || defaultCIMDHostLimit.PerMinute != 30 {
		t.Fatalf("defaults changed: %+v %+v", defaultRegistrationLimit, defaultCIMDHostLimit)
	}
}

// TestBucketsDefaultRate: the default registration limit lets 5 through
// at once and one more every 6 seconds.
func TestBucketsDefaultRate(t *testing.T) {
	b := newBuckets[string](defaultRegistrationLimit, 10)
	now := time.Unix(1000, 0)
	for i := range 5 {
		if w := spend(now, b.get("a", now)); w != 0 {
			t.Fatalf("registration %d waits %v", i+1, w)
		}
	}
	if w := spend(now, b.get("a", now)); w != 6*time.Second {
		t.Fatalf("sixth waits %v, want 6s", w)
	}
	if w := spend(now.Add(6*time.Second), b.get("a", now)); w != 0 {
		t.Fatalf("after 6s: waits %v", w)
	}
	if w := spend(now, b.get("b", now)); w != 0 {
		t.Fatalf("another key waits %v", w)
	}
}

// TestSpendAllOrNothing: a refusal by one limiter spends nothing of the
// others.
func TestSpendAllOrNothing(t *testing.T) {
	now := time.Unix(1000, 0)
	host := RateLimit{PerMinute: 1, Burst: 2}.limiter()
	total := RateLimit{PerMinute: 1, Burst: 1}.limiter()
	if w := spend(now, host, total); w != 0 {
		t.Fatal(w)
	}
	if w := spend(now, host, total); w == 0 {
		t.Fatal("total limit not applied")
	}
	if got := host.TokensAt(now); got != 1 {
		t.Fatalf("host bucket has %v tokens after a refused spend, want 1", got)
	}
	off := RateLimit{PerMinute: -1}.limiter()
	for range 1000 {
		if w := spend(now, off); w != 0 {
			t.Fatal("a limit that is off refused")
		}
	}
}

// TestBucketsBounded: a flood of keys never grows the map past its bound,
// and refilled (idle) buckets are the first to go.
func TestBucketsBounded(t *testing.T) {
	b := newBuckets[string](RateLimit{PerMinute: 1, Burst: 1}, 64)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		spend(now, b.get(fmt.Sprint("flood", i), now))
		if len(b.m) > 64 {
			t.Fatalf("%d buckets after %d keys", len(b.m), i+1)
		}
	}

	b = newBuckets[string](RateLimit{PerMinute: 1, Burst: 1}, 64)
	for i := range 63 {
		spend(now, b.get(fmt.Sprint("idle", i), now))
	}
	busyAt := now.Add(59 * time.Second)
	spend(busyAt, b.get("busy", busyAt))
	later := now.Add(60 * time.Second)
	spend(later, b.get("new", later))
	if len(b.m) != 2 || b.m["busy"] == nil || b.m["new"] == nil {
		t.Fatalf("after the sweep: %d buckets, want busy and new", len(b.m))
	}
	if w := spend(later, b.get("busy", later)); w == 0 {
		t.Fatal("the busy bucket was reset by the sweep")
	}

	off := newBuckets[string](RateLimit{PerMinute: -1}, 64)
	for i := range 100 {
		off.get(fmt.Sprint(i), now)
	}
	if len(off.m) != 0 {
		t.Fatalf("a limit that is off remembers %d keys", len(off.m))
	}
}

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, c := range []struct {
		remote, xff, want string
		trust             bool
	}{
		{"203.0.113.1:4000", "", "203.0.113.1/32", true},
		{"203.0.113.1:4000", "198.51.100.1", "203.0.113.1/32", true}, // untrusted peer
		{"10.0.0.1:4000", "198.51.100.1", "198.51.100.1/32", true},
		{"10.0.0.1:4000", "198.51.100.1", "10.0.0.1/32", false},
		{"10.0.0.1:4000", "1.2.3.4, 198.51.100.1, 10.9.9.9", "198.51.100.1/32", true},
		{"10.0.0.1:4000", "10.2.2.2, 10.3.3.3", "10.2.2.2/32", true}, // all trusted: the farthest
		{"10.0.0.1:4000", "198.51.100.1:5555", "198.51.100.1/32", true},
		{"10.0.0.1:4000", "[2001:db8::1]:5555", "2001:db8::/64", true},
		{"10.0.0.1:4000", "junk", "10.0.0.1/32", true},
		{"[fd00::1]:4000", "2001:db8:0:7:1:2:3:4", "2001:db8:0:7::/64", true},
		{"[2001:db8:a:b:c::1]:4000", "", "2001:db8:a:b::/64", true},
		{"[::ffff:203.0.113.9]:4000", "", "203.0.113.9/32", true},
		{"[fe80::1%eth0]:4000", "", "fe80::/64", true},
		{"@", "", "invalid Prefix", true},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		tr := trusted
		if !c.trust {
			tr = nil
		}
		if got := clientAddr(r, tr).String(); got != c.want {
			t.Errorf("%s with X-Forwarded-For %q: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}
