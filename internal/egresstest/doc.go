// Package egresstest is for tests only: it builds a small "internet" that
// a test can reach instead of the real one, so that berth's egress gateway,
// and the tools a sandbox runs through it (pip, git, npm, curl), can be
// tested on a machine with no outside network.
//
// Start makes one network namespace, joined to the host's by a veth pair,
// with the host routing to it only the addresses of one slot (see Plan).
// Its hosts are addresses on the namespace's loopback, served by
// goroutines of the test process from listeners made inside the
// namespace; no other process runs there:
//
//   - ns.test: DNS over UDP and TCP, authoritative for .test (and some
//     names that resolve where the gateway must refuse to go);
//   - files.test: /hello and /bytes/N;
//   - tls.test: /hello over HTTPS with a CA made at Start;
//   - git.test: a bare repository demo.git over smart HTTP;
//   - pypi.test: a PEP 503 index with the wheel berth-demo 1.0;
//   - npm.test: a registry with the package berth-demo 1.0.0.
//
// Every web host answers both HTTP on port 80 and HTTPS on port 443, on
// its IPv4 and its IPv6 address.
//
// Client makes a further namespace, linked straight to the internet's,
// whose resolv.conf names the test DNS: the real pip, git and npm run
// there unchanged.
//
// Several test binaries may run at once on one machine: each Internet
// takes one of eight slots under a lock file, and uses only its slot's
// addresses and names, so they never meet. Slot n has 203.0.113.(32n)/27
// and 2001:db8:203:n::/64 for its hosts, and 198.18.n.0/30 and fd42:n::/64
// for the link; whoever takes a slot first removes what a crashed holder
// left in it.
//
// Use:
//
//	inet := egresstest.Start(t)               // skips unless root with ip(8)
//	hc := inet.HTTPClient()                   // test DNS, test CA
//	resp, err := hc.Get("https://tls.test/hello")
//	r := inet.Resolver()                      // for a gateway under test
//	inet.SetName("evil.test", netip.MustParseAddr("10.1.2.3"))
//	c := inet.Client(t)                       // real tools, resolv.conf → test DNS
//	out, err := c.Run(ctx, "pip", "install", "--index-url", "https://pypi.test/simple", "--target", dir, "berth-demo")
//
// Env gives the variables that make pip, git, npm, curl and Python trust
// the test CA (CABundleFile: the system's CAs and it). When the test
// ends, the servers stop, connections still open are reset, and the
// namespaces go; Start reports a test error if the kernel did not destroy
// the namespace (something kept a socket in it).
package egresstest
