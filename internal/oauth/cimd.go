package oauth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/berth-mcp/berth/internal/netguard"
)

// Limits of client ID metadata document fetches.
const (
	cimdTimeout      = 5 * time.Second
	cimdMaxBytes     = 64 << 10
	cimdDefaultTTL   = 5 * time.Minute
	cimdMaxTTL       = 24 * time.Hour
	cimdCacheEntries = 512
)

// cimdFetcher fetches client ID metadata documents without letting a
// client_id reach into berth's network: https only, every address the
// name resolves to must be public, the connection goes to the address that
// was checked, no redirects, a time and a size limit. Documents are cached
// by their HTTP caching headers, within bounds, and fetches are rate
// limited per host and in all, since anyone can name any URL.
type cimdFetcher struct {
	client       *http.Client
	allowPrivate bool
	now          func() time.Time
	perHost      *buckets[string]
	total        *rate.Limiter

	mu    sync.Mutex
	cache map[string]cimdEntry
}

type cimdEntry struct {
	meta    clientMetadata
	etag    string
	expires time.Time
}

func newCIMDFetcher(allowPrivate bool, tlsConfig *tls.Config, now func() time.Time, hostLimit, totalLimit RateLimit) *cimdFetcher {
	f := &cimdFetcher{
		allowPrivate: allowPrivate, now: now, cache: map[string]cimdEntry{},
		perHost: newBuckets[string](hostLimit, maxCIMDHostBuckets),
		total:   totalLimit.limiter(),
	}
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
	}
	tr := &http.Transport{
		// A proxy would do its own resolution, around the check.
		Proxy:                 nil,
		DialContext:           f.dial,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   cimdTimeout,
		ResponseHeaderTimeout: cimdTimeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	f.client = &http.Client{
		Transport: tr,
		Timeout:   cimdTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return f
}

// dial resolves host, refuses it when any of its addresses is not public
// (unless allowPrivate), and connects to the checked addresses themselves
// so that a second resolution cannot swap in another one.
func (f *cimdFetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	for _, ip := range ips {
		if err := f.checkAddr(ip); err != nil {
			return nil, fmt.Errorf("%s: %w", host, err)
		}
	}
	d := net.Dialer{Timeout: cimdTimeout}
	var firstErr error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// errPrivateAddress marks a refused address.
var errPrivateAddress = errors.New("address is not public")

// checkAddr applies netguard's rule, which allowPrivate lifts for all but
// the unspecified address (never a server anyone meant to name).
func (f *cimdFetcher) checkAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.IsUnspecified() {
		return fmt.Errorf("%w: %s is unspecified", errPrivateAddress, ip)
	}
	if f.allowPrivate {
		return nil
	}
	if reason, ok := netguard.Check(ip); !ok {
		return fmt.Errorf("%w: %s is %s", errPrivateAddress, ip, reason)
	}
	return nil
}

// isCIMDClientID reports whether client_id is meant as a metadata
// document URL (any absolute URL); checkCIMDURL then decides if it is an
// acceptable one.
func isCIMDClientID(id string) bool { return strings.Contains(id, "://") }

// checkCIMDURL applies the rules for a client ID URL: https, a host, a
// path, no fragment, no user information, no query, no dot segments.
func checkCIMDURL(raw string) error {
	if len(raw) > maxRedirectURILen || hasControl(raw) || strings.Contains(raw, " ") {
		return fmt.Errorf("client_id URL is longer than %d characters or has spaces or control characters", maxRedirectURILen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("client_id %q is not a URL", raw)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("client_id %q: a client ID metadata document URL must use https", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("client_id %q has no host", raw)
	case u.User != nil:
		return fmt.Errorf("client_id %q must not carry user information", raw)
	case strings.Contains(raw, "#"):
		return fmt.Errorf("client_id %q must not have a fragment", raw)
	case u.RawQuery != "" || strings.Contains(raw, "?"):
		return fmt.Errorf("client_id %q must not have a query", raw)
	case u.Path == "" || u.Path == "/":
		return fmt.Errorf("client_id %q must have a path", raw)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("client_id %q must not have . or .. path segments", raw)
		}
	}
	return nil
}

// get returns the validated metadata of the client whose client_id is the
// document URL id. Errors are *oauthError invalid_client with a
// description meant for the user.
func (f *cimdFetcher) get(ctx context.Context, id string) (clientMetadata, error) {
	if err := checkCIMDURL(id); err != nil {
		return clientMetadata{}, oerr(errInvalidClient, "%v", err)
	}
	now := f.now()
	f.mu.Lock()
	e, cached := f.cache[id]
	f.mu.Unlock()
	if cached && now.Before(e.expires) {
		return e.meta, nil
	}
	if oe := f.allowFetch(id, now); oe != nil {
		if cached {
			// Better a document a little past its max-age than none.
			return e.meta, nil
		}
		return clientMetadata{}, oe
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return clientMetadata{}, oerr(errInvalidClient, "client_id %q: %v", id, err)
	}
	req.Header.Set("Accept", "application/json")
	if cached && e.etag != "" {
		req.Header.Set("If-None-Match", e.etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return clientMetadata{}, oerr(errInvalidClient, "fetch client metadata document %s: %v", id, cleanFetchError(err))
	}
	defer resp.Body.Close()
	ttl := cacheTTL(resp.Header)
	if resp.StatusCode == http.StatusNotModified && cached {
		f.store(id, cimdEntry{meta: e.meta, etag: e.etag, expires: now.Add(ttl)})
		return e.meta, nil
	}
	if resp.StatusCode != http.StatusOK {
		return clientMetadata{}, oerr(errInvalidClient, "fetch client metadata document %s: status %d (redirects are not followed)", id, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return clientMetadata{}, oerr(errInvalidClient, "client metadata document %s has content type %q, want application/json", id, mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, cimdMaxBytes+1))
	if err != nil {
		return clientMetadata{}, oerr(errInvalidClient, "read client metadata document %s: %v", id, cleanFetchError(err))
	}
	if len(body) > cimdMaxBytes {
		return clientMetadata{}, oerr(errInvalidClient, "client metadata document %s is larger than %d bytes", id, cimdMaxBytes)
	}
	var m clientMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return clientMetadata{}, oerr(errInvalidClient, "client metadata document %s is not valid JSON metadata: %v", id, err)
	}
	if m.ClientID != id {
		return clientMetadata{}, oerr(errInvalidClient, "client metadata document %s names client_id %q; it must equal the document's URL", id, m.ClientID)
	}
	if oe := m.normalize(true); oe != nil {
		return clientMetadata{}, oerr(errInvalidClient, "client metadata document %s: %s", id, oe.Description)
	}
	if ttl > 0 {
		f.store(id, cimdEntry{meta: m, etag: resp.Header.Get("ETag"), expires: now.Add(ttl)})
	}
	return m, nil
}

// allowFetch spends a fetch of id's host and of the overall budget, or
// says which one is exhausted and for how long.
func (f *cimdFetcher) allowFetch(id string, now time.Time) *oauthError {
	u, err := url.Parse(id)
	if err != nil {
		return oerr(errInvalidClient, "client_id %q is not a URL", id)
	}
	host := strings.ToLower(u.Hostname())
	hostL := f.perHost.get(host, now)
	wait := spend(now, hostL, f.total)
	if wait == 0 {
		return nil
	}
	// Tell which budget ran out; a host can be the cause of both.
	if hostL.TokensAt(now) < 1 {
		return tooMany(errInvalidClient, wait,
			"client metadata document %s was not fetched: too many documents were fetched from %s recently; try again in %d seconds",
			id, host, retrySeconds(wait))
	}
	return tooMany(errInvalidClient, wait,
		"client metadata document %s was not fetched: too many client metadata documents were fetched recently; try again in %d seconds",
		id, retrySeconds(wait))
}

// store caches an entry; a full cache first drops expired entries, then
// arbitrary ones, so memory stays bounded whatever clients are named.
func (f *cimdFetcher) store(id string, e cimdEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[id]; !ok && len(f.cache) >= cimdCacheEntries {
		now := f.now()
		for k, v := range f.cache {
			if !now.Before(v.expires) {
				delete(f.cache, k)
			}
		}
		for k := range f.cache {
			if len(f.cache) < cimdCacheEntries {
				break
			}
			delete(f.cache, k)
		}
	}
	f.cache[id] = e
}

// cacheTTL reads Cache-Control: no-store and no-cache mean 0, max-age is
// used up to cimdMaxTTL, and nothing means cimdDefaultTTL.
func cacheTTL(h http.Header) time.Duration {
	cc := strings.ToLower(h.Get("Cache-Control"))
	if cc == "" {
		return cimdDefaultTTL
	}
	ttl := cimdDefaultTTL
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "no-store" || d == "no-cache":
			return 0
		case strings.HasPrefix(d, "max-age="):
			n, err := strconv.Atoi(strings.Trim(strings.TrimPrefix(d, "max-age="), `"`))
			if err == nil && n >= 0 {
				ttl = time.Duration(n) * time.Second
			}
		}
	}
	return min(ttl, cimdMaxTTL)
}

// cleanFetchError drops the *url.Error wrapping, which repeats the URL.
func cleanFetchError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
