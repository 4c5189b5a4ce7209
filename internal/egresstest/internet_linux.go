package egresstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/netns"
)

// Internet is a running test internet. Its fields are set by Start and
// never change.
type Internet struct {
	Plan
	// Namespace is the name of its network namespace (/run/netns/NAME).
	Namespace string
	// DNS and DNS6 are its DNS server's "addr:53".
	DNS, DNS6 string
	// Hosts and Hosts6 are the addresses of the hosts by name.
	Hosts, Hosts6 map[string]netip.Addr
	// CAFile is the PEM file of the CA that signed every host's
	// certificate, and CABundle the system's CAs (Debian's bundle) and it,
	// as in the file CABundleFile: what SSL_CERT_FILE and the like take
	// (see Env).
	CAFile       string
	CABundle     []byte
	CABundleFile string

	ns   *netns.Handle
	dir  string
	zone *zone
	ca   *authority
	web  map[string]*webHost
	logf func(format string, args ...any)

	// undo is what close runs, last first, to remove what start made.
	undo []func(ctx context.Context) error
	// lingered says close had to cut the link by hand: something still
	// held the namespace.
	lingered bool

	stops      []func(ctx context.Context) error
	wg         sync.WaitGroup
	mu         sync.Mutex
	quiet      bool // set when closed: nothing may log through the test any more
	nextClient int
	clients    map[string]bool
}

// startTimeout bounds Start, waiting for a free slot included.
const startTimeout = 3 * time.Minute

// Start makes a test internet that lives until the test ends. It skips
// the test when it cannot run here (not root, or no ip command).
func Start(t testing.TB) *Internet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("egresstest: a test internet needs root (it makes network namespaces, veth links and routes); run the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("egresstest: a test internet needs the ip command (iproute2): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	i := &Internet{dir: t.TempDir(), clients: map[string]bool{}, zone: newZone(), web: map[string]*webHost{}}
	i.logf = func(format string, args ...any) {
		i.mu.Lock()
		defer i.mu.Unlock()
		if !i.quiet {
			t.Logf("egresstest: "+format, args...)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute+linger)
		defer cancel()
		if err := i.close(ctx); err != nil {
			t.Errorf("egresstest: remove the test internet: %v", err)
		}
	})
	if err := i.start(ctx); err != nil {
		t.Fatalf("egresstest: start the test internet: %v", err)
	}
	return i
}

// start takes a slot, sweeps it, and builds the namespace and its hosts.
// Whatever it made is on i.undo, also when it fails.
func (i *Internet) start(ctx context.Context) error {
	lock, err := acquireSlot(ctx)
	if err != nil {
		return err
	}
	i.undo = append(i.undo, func(context.Context) error { return lock.release() })
	if err := sweep(ctx, lock.n); err != nil {
		return fmt.Errorf("remove leftovers of slot %d: %w", lock.n, err)
	}
	i.Plan = PlanFor(lock.n)
	i.Namespace = namespacePrefix(lock.n) + randomSuffix()
	i.Hosts, i.Hosts6 = map[string]netip.Addr{}, map[string]netip.Addr{}
	for _, h := range hostOffsets {
		i.Hosts[h.name], i.Hosts6[h.name] = i.host(h.off)
	}
	i.DNS = netip.AddrPortFrom(i.Hosts["ns.test"], 53).String()
	i.DNS6 = netip.AddrPortFrom(i.Hosts6["ns.test"], 53).String()

	i.undo = append(i.undo, func(ctx context.Context) error {
		lingered, err := removeNetwork(ctx, i.Plan, i.Namespace)
		i.lingered = lingered
		if lingered {
			err = errors.Join(err, fmt.Errorf("namespace %s was still held %v after its removal (a socket in it left open?); its link was cut by hand", i.Namespace, linger))
		}
		return err
	})
	if err := buildNetwork(ctx, i.Plan, i.Namespace); err != nil {
		return err
	}
	h, err := netns.Open("/run/netns/" + i.Namespace)
	if err != nil {
		return err
	}
	i.ns = h
	i.undo = append(i.undo, func(context.Context) error { return h.Close() })
	// The clients' namespaces are removed before the internet's: each is
	// linked to it.
	i.undo = append(i.undo, i.removeClients)
	// Servers stop before anything else goes: their sockets hold the
	// namespace.
	i.undo = append(i.undo, i.stopServers)
	return i.serve(ctx)
}

// close undoes start, last step first, and reports every step that failed.
func (i *Internet) close(ctx context.Context) error {
	var errs []error
	for k := len(i.undo) - 1; k >= 0; k-- {
		if err := i.undo[k](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	i.undo = nil
	i.mu.Lock()
	i.quiet = true
	i.mu.Unlock()
	return errors.Join(errs...)
}

// Addr returns the IPv4 address of host name ("files.test"); it panics on
// a name the internet does not have, as a test mistake.
func (i *Internet) Addr(name string) netip.Addr {
	a, ok := i.Hosts[name]
	if !ok {
		panic(fmt.Sprintf("egresstest: no host %q", name))
	}
	return a
}

// Addr6 is Addr for IPv6.
func (i *Internet) Addr6(name string) netip.Addr {
	a, ok := i.Hosts6[name]
	if !ok {
		panic(fmt.Sprintf("egresstest: no host %q", name))
	}
	return a
}

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Env is the environment that makes the usual tools trust the test CA as
// well as the system's: OpenSSL and Python (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE), pip (PIP_CERT), git (GIT_SSL_CAINFO), curl
// (CURL_CA_BUNDLE), node (NODE_EXTRA_CA_CERTS) and npm, whose cafile
// setting would otherwise replace node's CAs (npm_config_cafile).
func (i *Internet) Env() []string {
	return []string{
		"npm_config_cafile=" + i.CABundleFile,
		"SSL_CERT_FILE=" + i.CABundleFile,
		"REQUESTS_CA_BUNDLE=" + i.CABundleFile,
		"PIP_CERT=" + i.CABundleFile,
		"GIT_SSL_CAINFO=" + i.CABundleFile,
		"CURL_CA_BUNDLE=" + i.CABundleFile,
		"NODE_EXTRA_CA_CERTS=" + i.CAFile,
	}
}
