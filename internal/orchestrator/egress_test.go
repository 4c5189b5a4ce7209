//go:build linux

package orchestrator_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/egresstest"
	"github.com/berth-mcp/berth/internal/observe"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/wire"
)

// The test internet's ranges, which the operator makes reachable here as
// one would an internal mirror: berth refuses documentation ranges
// otherwise.
var testInternet = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:203::/48")}

// egressEnv is an orchestrator whose confined sandboxes reach the test
// internet through berth's egress gateway.
type egressEnv struct {
	*orchtest.Env
	inet  *egresstest.Internet
	alice rbac.Principal
	// caEnv makes the sandbox's tools trust the test CA, which a sandbox
	// is given at /workspace/ca.pem (see trustTestCA).
	caEnv map[string]string
}

func newEgressEnv(t testing.TB, limits egress.Limits, cfg orchestrator.Config) *egressEnv {
	t.Helper()
	inet := egresstest.Start(t)
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: orchtest.DataDir(t), AgentBinary: agentBin, Logger: orchtest.Logger(t),
		Egress: local.EgressOptions{Guard: &egress.Guard{Reachable: testInternet}, Resolver: inet.Resolver(), Limits: limits}})
	e := orchtest.NewOn(t, rt, testConfig(t, cfg))
	ca := "/workspace/ca.pem"
	return &egressEnv{Env: e, inet: inet, alice: principal(t, e.Svc, "alice"), caEnv: map[string]string{
		"SSL_CERT_FILE": ca, "REQUESTS_CA_BUNDLE": ca, "PIP_CERT": ca, "GIT_SSL_CAINFO": ca, "CURL_CA_BUNDLE": ca,
		"NODE_EXTRA_CA_CERTS": ca, "npm_config_cafile": ca,
	}}
}

// start starts a server with network policy n (nil: the default) and
// gives it the test CA.
func (e *egressEnv) start(t testing.TB, n *egress.Policy) string {
	t.Helper()
	c := registerClient(t, e.Svc, e.alice, "egress")
	id := startServer(t, e.Svc, e.alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", Network: n}).ServerID
	res := bash(t, e.Svc, e.alice, id, "cat > /workspace/ca.pem <<'EOF'\n"+string(e.inet.CABundle)+"EOF\n", nil)
	if res.ExitCode != 0 {
		t.Fatalf("write the CA: %s", res.Stderr)
	}
	return id
}

// run runs command in server id with the CA's environment.
func (e *egressEnv) run(t testing.TB, id, command string) wire.BashResult {
	t.Helper()
	return bash(t, e.Svc, e.alice, id, command, e.caEnv)
}

// ok runs command and fails the test unless it exits 0.
func (e *egressEnv) ok(t testing.TB, id, command string) string {
	t.Helper()
	res := e.run(t, id, command)
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// refused runs command, which must fail, fast, saying one of words (the
// plain HTTP proxy's 403 says why in its body: run curl with
// --fail-with-body; a CONNECT's 403 only that it was refused).
func (e *egressEnv) refused(t *testing.T, id, command string, words ...string) {
	t.Helper()
	began := time.Now()
	res := e.run(t, id, command)
	took := time.Since(began)
	out := res.Stdout + res.Stderr
	if res.ExitCode == 0 {
		t.Fatalf("%s succeeded; want it refused\n%s", command, out)
	}
	for _, w := range words {
		if strings.Contains(out, w) {
			// Refused at once, not after a connect timeout: generous for
			// a loaded machine, far below any tool's timeout.
			if took > 20*time.Second {
				t.Errorf("%s was refused after %s: a refusal must be fast", command, took)
			}
			return
		}
	}
	t.Fatalf("%s: exit %d, want one of %q in\n%s", command, res.ExitCode, words, out)
}

// TestEgressPublic: a sandbox with the public policy does a real task on
// the test internet (curl over HTTP and HTTPS, git clone and the repo's
// tests, pip install, npm install), while nothing berth refuses is
// reached, by name or address, through the proxy or around it.
func TestEgressPublic(t *testing.T) {
	var counted sync.Map // reason ("" allowed) -> *atomic.Int64
	count := func(reason string) {
		n, _ := counted.LoadOrStore(reason, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	e := newEgressEnv(t, egress.Limits{}, orchestrator.Config{Observe: observe.Hooks{Egress: count}})
	id := e.start(t, &egress.Policy{Egress: egress.Public})

	t.Run("a real task", func(t *testing.T) {
		if got := e.ok(t, id, "curl -sS http://files.test/hello"); got != "hello from the test internet\n" {
			t.Fatalf("http: %q", got)
		}
		e.ok(t, id, "curl -sS https://tls.test/hello")
		e.ok(t, id, "curl -sS 'https://["+e.inet.Addr6("tls.test").String()+"]/hello'")
		if got := e.ok(t, id, "cd /workspace && git clone -q https://git.test/demo.git && sh demo/test.sh"); !strings.Contains(got, "tests passed") {
			t.Fatalf("git clone and test: %q", got)
		}
		if got := e.ok(t, id, "cd /workspace && pip install -q --disable-pip-version-check --target py --index-url https://pypi.test/simple berth-demo && PYTHONPATH=py python3 -c 'import berth_demo; print(berth_demo.GREETING)'"); got != "hi\n" {
			t.Fatalf("pip install: %q", got)
		}
		e.ok(t, id, "cd /workspace && mkdir -p n && cd n && npm install --silent --no-audit --no-fund --registry https://npm.test berth-demo && test -f node_modules/berth-demo/package.json")
		// A tool that resolves first and connects to the address it got
		// (socks5, not socks5h) is decided by the name it asked for.
		e.ok(t, id, "curl -sS -x socks5://127.0.0.1:3128 http://files.test/hello")
		e.ok(t, id, "getent hosts files.test")
	})

	t.Run("refused", func(t *testing.T) {
		refusals := map[string]string{
			"curl -sS http://rebind.test/":                                          "loopback",
			"curl -sS http://private.test/":                                         "private",
			"curl -sS http://meta.test/":                                            "metadata",
			"curl -sS http://169.254.169.254/latest/":                               "metadata",
			"curl -sS --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:5432/": "loopback",
			"curl -sS --noproxy '' -x http://127.0.0.1:3128 http://[::1]:5432/":     "loopback",
			"curl -sS http://10.0.0.5:5432/":                                        "private",
			"curl -sS http://100.64.0.1/":                                           "carrier-grade NAT",
			"curl -sS 'http://[fd00::1]/'":                                          "unique local",
			"curl -sS 'http://[fd00:ec2::254]/'":                                    "metadata",
			fmt.Sprintf("curl -sS http://%s/", e.inet.HostLink):                     "403",
		}
		for cmd, why := range refusals {
			// --fail-with-body: the proxy's answer says why.
			cmd = strings.Replace(cmd, "curl -sS", "curl -sS --fail-with-body", 1)
			e.refused(t, id, cmd, why)
		}
	})

	t.Run("around the proxy", func(t *testing.T) {
		// Nothing routes out of the sandbox but through the gateway: a
		// tool that ignores the proxy fails at once.
		files := e.inet.Addr("files.test").String()
		e.refused(t, id, "curl -sS --noproxy '*' http://"+files+"/hello", "Network is unreachable", "Couldn't connect")
		e.refused(t, id, "python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"x\", (\""+files+"\", 9))'", "Network is unreachable")
		// Raw sockets may be opened (net_raw is a container runtime's
		// default), but nothing they send leaves the sandbox.
		e.refused(t, id, "python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.sendto(bytes([8,0,247,255,0,0,0,0]), (\""+files+"\", 0))'", "Network is unreachable", "Operation not permitted")
		e.refused(t, id, "ping -c1 -W2 "+files, "Network is unreachable", "Operation not permitted", "not found", "permission")
	})

	t.Run("another sandbox", func(t *testing.T) {
		// Another sandbox has no address of its own to reach: its
		// agent's socket and its loopback are in its own namespace. What
		// it serves on its loopback is not this sandbox's loopback.
		other := e.start(t, nil)
		sessionExec(t, e.Svc, e.alice, other, "s", "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &")
		waitFor(t, "the other sandbox's server", func() (bool, error) {
			return e.run(t, other, "curl -sS --noproxy '*' -o /dev/null http://127.0.0.1:8765/").ExitCode == 0, nil
		})
		e.refused(t, id, "curl -sS --noproxy '*' http://127.0.0.1:8765/", "Connection refused", "Couldn't connect")
	})

	t.Run("refusals are counted", func(t *testing.T) {
		// berth_egress_connections_total's hook: by outcome and rule,
		// never the destination.
		for _, reason := range []string{"", "private range", "cloud metadata", "loopback"} {
			n, ok := counted.Load(reason)
			if !ok || n.(*atomic.Int64).Load() == 0 {
				t.Errorf("no connection counted with reason %q", reason)
			}
		}
		counted.Range(func(k, _ any) bool {
			if r := k.(string); strings.ContainsAny(r, ".:") && !strings.HasPrefix(r, "reserved range") {
				t.Errorf("a counted reason names a destination: %q", r)
			}
			return true
		})
	})

	t.Run("refusals are shown", func(t *testing.T) {
		waitFor(t, "the refusals in get_server's events", func() (bool, error) {
			d, err := e.Svc.GetServer(context.Background(), e.alice, id)
			if err != nil {
				return false, err
			}
			for _, ev := range d.Events {
				if ev.Reason == "EgressRefused" && strings.Contains(ev.Message, "private") {
					return true, nil
				}
			}
			return false, nil
		})
	})
}

// TestEgressPolicyChanges: an allowlist lets only its names through; a
// changed policy decides the next connection; none lets nothing out.
func TestEgressPolicyChanges(t *testing.T) {
	e := newEgressEnv(t, egress.Limits{}, orchestrator.Config{})
	id := e.start(t, &egress.Policy{Egress: egress.Allowlist, Allow: []string{"files.test", "*.wild.test"}})
	e.ok(t, id, "curl -sS http://files.test/hello")
	e.ok(t, id, "curl -sS http://a.wild.test/hello")
	e.refused(t, id, "curl -sS https://tls.test/hello", "403")
	e.refused(t, id, "curl -sS --fail-with-body http://"+e.inet.Addr("tls.test").String()+"/hello", "allowlist")
	ctx := context.Background()
	srv, err := e.Svc.SetServerNetwork(ctx, e.alice, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.Allowlist, Allow: []string{"tls.test:443"}}})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Network == nil || srv.Network.Egress != egress.Allowlist {
		t.Fatalf("set_server_network answered %+v", srv.Network)
	}
	e.ok(t, id, "curl -sS https://tls.test/hello")
	e.refused(t, id, "curl -sS --fail-with-body http://tls.test/hello", "allowlist")
	// What docs/quickstart.md shows: pip with an allowlist of its index.
	if _, err := e.Svc.SetServerNetwork(ctx, e.alice, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.Allowlist, Allow: []string{"pypi.test"}}}); err != nil {
		t.Fatal(err)
	}
	if got := e.ok(t, id, "cd /workspace && pip install -q --disable-pip-version-check --target py --index-url https://pypi.test/simple berth-demo && PYTHONPATH=py python3 -c 'import berth_demo; print(berth_demo.GREETING)'"); got != "hi\n" {
		t.Fatalf("pip install under an allowlist: %q", got)
	}
	e.refused(t, id, "cd /workspace && git clone -q https://git.test/demo.git", "403")
	e.refused(t, id, "curl -sS --fail-with-body http://files.test/hello", "allowlist")
	// The failed command's result says what was refused while it ran.
	res := e.run(t, id, "curl -sSf http://files.test/hello")
	if want := "egress refused: files.test:80, not in allowlist"; res.ExitCode == 0 || !slices.Contains(res.EgressRefused, want) {
		t.Fatalf("exit %d, the result names %q, want %q", res.ExitCode, res.EgressRefused, want)
	}
	if _, err := e.Svc.SetServerNetwork(ctx, e.alice, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.None}}); err != nil {
		t.Fatal(err)
	}
	e.refused(t, id, "curl -sS --fail-with-body http://tls.test/hello", "none")
	if res := e.run(t, id, "getent hosts files.test"); res.ExitCode == 0 {
		t.Fatalf("the resolver answered under none: %s", res.Stdout)
	}
	// Another member may not change it.
	bob := principal(t, e.Svc, "bob")
	_, err = e.Svc.SetServerNetwork(ctx, bob, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.Public}})
	wantCode(t, err, wire.CodeNotFound)
}

// TestEgressLimits: a sandbox past its byte limit is cut with an error,
// not left hanging, and its next connection is refused.
func TestEgressLimits(t *testing.T) {
	e := newEgressEnv(t, egress.Limits{Bytes: 4 << 20, Connections: 4}, orchestrator.Config{})
	id := e.start(t, nil)
	e.ok(t, id, "curl -sS -o /dev/null http://files.test/bytes/1000000")
	e.refused(t, id, "curl -sS -o /dev/null http://files.test/bytes/10000000", "curl: (18)", "curl: (56)", "transfer closed")
	e.refused(t, id, "curl -sS --fail-with-body http://files.test/hello", "byte limit")
}

// TestEgressCeiling: the operator's ceiling bounds what a member asks
// for, and the refusal names the entry and the ceiling.
func TestEgressCeiling(t *testing.T) {
	e := newService(t, orchestrator.Config{EgressCeiling: egress.Ceiling{Egress: egress.Allowlist, Allow: []string{"*.python.org", "pypi.org"}}})
	alice := principal(t, e.Svc, "alice")
	c := registerClient(t, e.Svc, alice, "ceiling")
	_, err := e.Svc.StartServer(context.Background(), alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img",
		Network: &egress.Policy{Egress: egress.Allowlist, Allow: []string{"pypi.org", "evil.example"}}})
	wantCode(t, err, wire.CodeForbidden, "evil.example", "pypi.org")
	_, err = e.Svc.StartServer(context.Background(), alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img",
		Network: &egress.Policy{Egress: egress.Public}})
	wantCode(t, err, wire.CodeForbidden, "public")
	_, err = e.Svc.StartServer(context.Background(), alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img",
		Network: &egress.Policy{Egress: egress.Allowlist, Allow: []string{"bad name!"}}})
	wantCode(t, err, wire.CodeBadRequest, "bad name!")
	// Within the ceiling, and the default (narrowed to none by it).
	srv := startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img",
		Network: &egress.Policy{Egress: egress.Allowlist, Allow: []string{"docs.python.org:443"}}})
	if n := srv.Server.Network; n == nil || n.Egress != egress.Allowlist {
		t.Fatalf("network %+v", n)
	}
	srv = startServer(t, e.Svc, alice, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: "img", ServerName: "default"})
	if n := srv.Server.Network; n == nil || n.Egress != egress.None {
		t.Fatalf("default network under an allowlist ceiling: %+v", n)
	}
}

// TestEgressSessionSandbox: the sandbox a bash session starts takes the
// network policy of the call that starts it.
func TestEgressSessionSandbox(t *testing.T) {
	e := newEgressEnv(t, egress.Limits{}, orchestrator.Config{})
	ctx := context.Background()
	res, err := e.Svc.SessionBash(ctx, e.alice, orchestrator.SessionBashRequest{Session: "net",
		SessionExecRequest: wire.SessionExecRequest{Command: "curl -sSf http://files.test/hello && curl -sSf http://" + e.inet.Addr("tls.test").String() + "/hello"},
		Network:            &egress.Policy{Egress: egress.Allowlist, Allow: []string{"files.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || !strings.Contains(res.Stdout, "hello from the test internet") || res.ExitCode == 0 {
		t.Fatalf("started %v, exit %d: %s %s", res.Started, res.ExitCode, res.Stdout, res.Stderr)
	}
	if len(res.EgressRefused) == 0 || !strings.Contains(res.EgressRefused[0], "not in allowlist") {
		t.Fatalf("egress_refused %q", res.EgressRefused)
	}
	d, err := e.Svc.GetServer(ctx, e.alice, res.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Network == nil || d.Network.Egress != egress.Allowlist {
		t.Fatalf("the session's server has network %+v", d.Network)
	}
	_, err = e.Svc.Bash(ctx, e.alice, res.ServerID, orchestrator.SessionBashRequest{SessionExecRequest: wire.SessionExecRequest{Command: "true"},
		Network: &egress.Policy{Egress: egress.Public}})
	wantCode(t, err, wire.CodeBadRequest, "set_server_network")
}

// TestEgressStreamedExecNamesRefusals: a streamed command that failed
// ends with what the gateway refused while it ran.
func TestEgressStreamedExecNamesRefusals(t *testing.T) {
	e := newEgressEnv(t, egress.Limits{}, orchestrator.Config{})
	id := e.start(t, &egress.Policy{Egress: egress.None})
	end, err := e.Svc.StreamBash(context.Background(), e.alice, orchestrator.StreamBashRequest{ServerID: id, Command: "curl -sSf http://files.test/hello"},
		func(wire.ExecEvent) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if end.ExitCode == nil || *end.ExitCode == 0 || len(end.EgressRefused) == 0 || !strings.Contains(end.EgressRefused[0], "policy none") {
		t.Fatalf("final event %+v", end)
	}
}
